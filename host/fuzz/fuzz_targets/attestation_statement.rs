//! Fuzz target `attestation_statement`: see `dpone_untrusted_inputs::TARGETS` and docs/testing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(target) = dpone_untrusted_inputs::target("attestation_statement") {
        (target.run)(data);
    }
});
