//! Fuzz target `np_queue_record`: see `dpone_untrusted_inputs::TARGETS` and docs/testing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(target) = dpone_untrusted_inputs::target("np_queue_record") {
        (target.run)(data);
    }
});
