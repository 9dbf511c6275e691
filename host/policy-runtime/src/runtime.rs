//! Loading components at pinned digests and running decisions.
//!
//! Load: bytes → sha256 → refuse unless equal to the pin → refuse any import → check the exported
//! world and package version → validate under the locked WebAssembly feature set → compile (or take verified bytes from the precompiled cache) →
//! type-check the exports into a prepared instance. Decide: fresh store, budgets, call, validate
//! the output, record evidence.

use crate::bindings;
use crate::cache::{Lookup, PrecompiledCache};
use crate::canonical::{DecisionInput, DecisionOutput, input_sha256};
use crate::convert;
use crate::digest::Sha256Digest;
use crate::error::PolicyError;
use crate::inspect::component_surface;
use crate::kind::{PolicyKind, SUPPORTED_WIT_PACKAGE, split_version};
use crate::sandbox::{
    Budget, EpochTicker, SandboxConfig, SandboxState, Step, build_engine, engine_fingerprint,
    run_in_fresh_store, spawn_thread, validate_features,
};
use crate::validate;

/// The generated types of each policy interface, for the direct call path.
mod wit {
    pub(super) use crate::bindings::admission::exports::dpone::policy::admission;
    pub(super) use crate::bindings::delete_mode::exports::dpone::policy::delete_mode;
    pub(super) use crate::bindings::guard::exports::dpone::policy::guard;
    pub(super) use crate::bindings::scope::exports::dpone::policy::scope;
}
use dpone_policy_model::{admission, delete_mode, guard, scope};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use wasmtime::component::{
    Component, ComponentExportIndex, ComponentNamedList, Instance, InstancePre, Lift, Linker,
    Lower, TypedFunc,
};
use wasmtime::{Engine, Store};

/// Loads policy components and runs their decisions. Cheap to share behind a reference; one per
/// process is enough.
pub struct PolicyRuntime {
    engine: Engine,
    config: SandboxConfig,
    fingerprint: Sha256Digest,
    cache: Option<PrecompiledCache>,
    _ticker: Arc<EpochTicker>,
}

/// How a component's code was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CodeSource {
    /// Compiled from the component bytes.
    Compiled,
    /// Deserialized from a verified cache entry.
    Cache,
    /// The cache entry failed verification; it was removed and the component recompiled.
    RecompiledAfterTamper,
}

/// What loading a component did.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// Policy kind.
    pub kind: PolicyKind,
    /// Pinned digest the component matched.
    pub component_sha256: Sha256Digest,
    /// Component size in bytes.
    pub size: usize,
    /// Where the code came from.
    pub code_source: CodeSource,
    /// Time spent compiling or loading, in microseconds.
    pub load_micros: u64,
}

/// Evidence of one decision: enough to replay it bit for bit.
#[derive(Clone, Debug, Serialize)]
pub struct DecisionEvidence {
    /// Policy kind.
    pub kind: PolicyKind,
    /// Function called, in WIT spelling.
    pub function: &'static str,
    /// Digest of the component that decided.
    pub component_sha256: Sha256Digest,
    /// WIT package version of the contract.
    pub wit_package: &'static str,
    /// sha256 of the canonical JSON of the input facts.
    pub input_sha256: Sha256Digest,
    /// The decision, as JSON.
    pub output: serde_json::Value,
    /// Fuel the decision used.
    pub fuel_used: u64,
}

/// A decision and its evidence.
#[derive(Clone, Debug)]
pub struct Decided<T> {
    /// The decision.
    pub decision: T,
    /// Its evidence.
    pub evidence: DecisionEvidence,
}

/// The prepared component of each kind, with the index of each exported function.
enum Prepared {
    Admission {
        pre: bindings::admission::AdmissionPolicyPre<SandboxState>,
        admit_static: ComponentExportIndex,
        admit_runtime: ComponentExportIndex,
    },
    Guard {
        pre: bindings::guard::GuardPolicyPre<SandboxState>,
        decide: ComponentExportIndex,
    },
    DeleteMode {
        pre: bindings::delete_mode::DeleteModePolicyPre<SandboxState>,
        plan: ComponentExportIndex,
    },
    Scope {
        pre: bindings::scope::ScopePolicyPre<SandboxState>,
        decide: ComponentExportIndex,
    },
}

/// An instance made for one decision, by one of two paths.
///
/// The generated bindings type-check every export of the interface against the host's types
/// each time they make an instance (`*PolicyPre::instantiate`): about 4% of a decision's
/// instructions. The type of an export is the component's, the same for every instance of one
/// `InstancePre`, so after one successful check ([`LoadedPolicy::exports_checked`]) later
/// decisions instantiate the same `InstancePre` directly and call the export through a
/// `TypedFunc` of the types that were checked.
enum Instantiated<B> {
    /// Through the generated bindings, which type-checked the exports.
    Checked(B),
    /// Directly, after an earlier check succeeded.
    Direct(Instance),
}

/// A component that passed every load check, ready to decide.
pub struct LoadedPolicy {
    kind: PolicyKind,
    digest: Sha256Digest,
    budget: Budget,
    report: LoadReport,
    engine: Engine,
    config: SandboxConfig,
    prepared: Prepared,
    /// The generated bindings type-checked this component's exports on one of its instances.
    exports_checked: AtomicBool,
}

impl PolicyRuntime {
    /// Builds a runtime with the given sandbox settings and starts its epoch ticker.
    pub fn new(config: SandboxConfig) -> Result<Self, PolicyError> {
        let engine = build_engine(&config)?;
        let fingerprint = engine_fingerprint(&engine);
        let ticker = EpochTicker::start(engine.clone(), config.epoch_tick, spawn_thread)?;
        Ok(Self {
            engine,
            config,
            fingerprint,
            cache: None,
            _ticker: Arc::new(ticker),
        })
    }

    /// Uses a precompiled-code cache.
    pub fn with_cache(mut self, cache: PrecompiledCache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Fingerprint of the engine (wasmtime version and code-affecting settings).
    pub fn engine_fingerprint(&self) -> Sha256Digest {
        self.fingerprint
    }

    /// Sandbox settings in force.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// Loads a component of `kind` whose sha256 must equal `pin`.
    pub fn load(
        &self,
        kind: PolicyKind,
        bytes: &[u8],
        pin: Sha256Digest,
        budget: Budget,
    ) -> Result<LoadedPolicy, PolicyError> {
        let digest = Sha256Digest::of(bytes);
        if digest != pin {
            return Err(PolicyError::PinMismatch {
                expected: pin.hex(),
                actual: digest.hex(),
            });
        }
        budget.check(&self.config)?;
        // The whole component is validated under the feature set before anything else reads it.
        validate_features(bytes)?;
        check_surface(kind, bytes)?;
        let started = Instant::now();
        let (component, code_source) = self.compile_or_load(bytes, &digest)?;
        let load_micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let linker: Linker<SandboxState> = Linker::new(&self.engine);
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(|e| PolicyError::ImportsForbidden(vec![e.to_string()]))?;
        let prepared = prepare(kind, instance_pre)?;
        Ok(LoadedPolicy {
            kind,
            digest,
            budget,
            report: LoadReport {
                kind,
                component_sha256: digest,
                size: bytes.len(),
                code_source,
                load_micros,
            },
            engine: self.engine.clone(),
            config: self.config.clone(),
            prepared,
            exports_checked: AtomicBool::new(false),
        })
    }

    fn compile_or_load(
        &self,
        bytes: &[u8],
        digest: &Sha256Digest,
    ) -> Result<(Component, CodeSource), PolicyError> {
        let compile = || {
            Component::new(&self.engine, bytes)
                .map_err(|e| PolicyError::CompileFailed(e.to_string()))
        };
        let Some(cache) = &self.cache else {
            return Ok((compile()?, CodeSource::Compiled));
        };
        let source = match cache.lookup(digest, &self.fingerprint) {
            Lookup::Hit(artifact) => {
                // SAFETY: `artifact` is byte-for-byte what this host serialized for this component
                // digest and engine fingerprint: these in-memory bytes have the sha256 and size of
                // a record whose HMAC under the host's secret cache key verified (only this host
                // can write such a record), and the engine fingerprint covers the wasmtime
                // version and code-affecting settings.
                #[allow(unsafe_code)]
                let loaded = unsafe { Component::deserialize(&self.engine, &artifact) };
                match loaded {
                    Ok(component) => return Ok((component, CodeSource::Cache)),
                    Err(_) => CodeSource::RecompiledAfterTamper,
                }
            }
            Lookup::Miss => CodeSource::Compiled,
            Lookup::Tampered => CodeSource::RecompiledAfterTamper,
        };
        let artifact = self
            .engine
            .precompile_component(bytes)
            .map_err(|e| PolicyError::CompileFailed(e.to_string()))?;
        cache.store(digest, &self.fingerprint, &artifact)?;
        // SAFETY: `artifact` was produced a moment ago by `precompile_component` of this very
        // engine from the pinned component bytes.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize(&self.engine, &artifact) }
            .map_err(|e| PolicyError::CompileFailed(e.to_string()))?;
        Ok((component, source))
    }
}

/// Refuses imports and checks that the component exports `kind`'s interface at the supported
/// package version, before anything is compiled.
fn check_surface(kind: PolicyKind, bytes: &[u8]) -> Result<(), PolicyError> {
    let surface = component_surface(bytes)?;
    if !surface.imports.is_empty() {
        return Err(PolicyError::ImportsForbidden(surface.imports));
    }
    let wanted = kind.export_name();
    if surface.exports.contains(&wanted) {
        return Ok(());
    }
    let (wanted_interface, _) = split_version(&wanted);
    if let Some(found) = surface
        .exports
        .iter()
        .find(|e| split_version(e).0 == wanted_interface)
    {
        return Err(PolicyError::WitVersionUnsupported {
            found: found.clone(),
            supported: wanted,
        });
    }
    Err(PolicyError::WorldMismatch {
        expected: kind,
        exports: surface.exports,
    })
}

fn prepare(kind: PolicyKind, pre: InstancePre<SandboxState>) -> Result<Prepared, PolicyError> {
    let mismatch = |e: wasmtime::Error| PolicyError::ExportTypeMismatch(e.to_string());
    let interface = kind.export_name();
    let index = |function: &str| {
        let component = pre.component();
        component
            .get_export_index(None, &interface)
            .and_then(|instance| component.get_export_index(Some(&instance), function))
            .ok_or_else(|| {
                PolicyError::ExportTypeMismatch(format!("no export `{function}` in `{interface}`"))
            })
    };
    Ok(match kind {
        PolicyKind::Admission => Prepared::Admission {
            admit_static: index("admit-static")?,
            admit_runtime: index("admit-runtime")?,
            pre: bindings::admission::AdmissionPolicyPre::new(pre.clone()).map_err(mismatch)?,
        },
        PolicyKind::Guard => Prepared::Guard {
            decide: index("decide")?,
            pre: bindings::guard::GuardPolicyPre::new(pre.clone()).map_err(mismatch)?,
        },
        PolicyKind::DeleteMode => Prepared::DeleteMode {
            plan: index("plan")?,
            pre: bindings::delete_mode::DeleteModePolicyPre::new(pre.clone()).map_err(mismatch)?,
        },
        PolicyKind::Scope => Prepared::Scope {
            decide: index("decide")?,
            pre: bindings::scope::ScopePolicyPre::new(pre.clone()).map_err(mismatch)?,
        },
    })
}

/// Calls the export `index` of a directly made instance as a function from `P` to `(R,)`.
///
/// # Safety
///
/// `P` and `(R,)` must be the parameter and result types with which the generated bindings
/// type-checked this export, and that check must have succeeded on an instance of the same
/// `InstancePre` as `instance` (which is what [`LoadedPolicy::exports_checked`] records).
// SAFETY: an `unsafe fn` because its soundness rests on the caller's promise stated above;
// every caller states at the call why it holds.
#[allow(unsafe_code)]
unsafe fn call_checked_export<P, R>(
    store: &mut Store<SandboxState>,
    instance: &Instance,
    index: &ComponentExportIndex,
    params: P,
) -> wasmtime::Result<R>
where
    P: ComponentNamedList + Lower,
    (R,): ComponentNamedList + Lift,
{
    let func = instance
        .get_func(&mut *store, index)
        .ok_or_else(|| wasmtime::Error::msg("policy export is not a function"))?;
    // SAFETY: the caller guarantees that the bindings type-checked this export, on an instance
    // of the same component, as a function from `P` to `(R,)`.
    let typed = unsafe { TypedFunc::<P, (R,)>::new_unchecked(func) };
    let (result,) = typed.call(store, params)?;
    Ok(result)
}

/// Tags a wasmtime error with the step of the decision it came from.
fn at(step: Step) -> impl FnOnce(wasmtime::Error) -> (Step, wasmtime::Error) {
    move |e| (step, e)
}

fn wrong_kind(loaded: PolicyKind, function: &str) -> PolicyError {
    PolicyError::UnknownFunction {
        kind: loaded,
        function: function.to_owned(),
    }
}

impl LoadedPolicy {
    /// Policy kind.
    pub fn kind(&self) -> PolicyKind {
        self.kind
    }

    /// Digest of the component.
    pub fn digest(&self) -> Sha256Digest {
        self.digest
    }

    /// Budget every decision gets.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// What loading did.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    /// Makes the decision's instance: through the generated bindings until they have
    /// type-checked the exports once, directly afterwards (see [`Instantiated`]).
    fn instantiate<B>(
        &self,
        pre: &InstancePre<SandboxState>,
        store: &mut Store<SandboxState>,
        checked: impl FnOnce(&mut Store<SandboxState>) -> wasmtime::Result<B>,
    ) -> wasmtime::Result<Instantiated<B>> {
        if self.exports_checked.load(Ordering::Acquire) {
            return Ok(Instantiated::Direct(pre.instantiate(store)?));
        }
        let bindings = checked(store)?;
        self.exports_checked.store(true, Ordering::Release);
        Ok(Instantiated::Checked(bindings))
    }

    /// Runs one call in a fresh sandbox, validates the output and records evidence.
    ///
    /// `instantiate` makes the instance from the prepared component; `call` invokes the export
    /// and converts its result. Their failures are classified separately.
    fn decide<I, N, O>(
        &self,
        function: &'static str,
        input: &I,
        instantiate: impl FnOnce(&mut wasmtime::Store<SandboxState>) -> wasmtime::Result<N>,
        call: impl FnOnce(N, &mut wasmtime::Store<SandboxState>) -> wasmtime::Result<O>,
        check: impl FnOnce(&I, &O) -> Result<(), String>,
    ) -> Result<Decided<O>, PolicyError>
    where
        I: DecisionInput,
        O: DecisionOutput,
    {
        let call = |store: &mut wasmtime::Store<SandboxState>| {
            let instance = instantiate(&mut *store).map_err(at(Step::Instantiate))?;
            call(instance, store).map_err(at(Step::Call))
        };
        let input_sha256 = input_sha256(input).map_err(|e| PolicyError::InputInvalid {
            function: function.to_owned(),
            message: e.to_string(),
        })?;
        let (decision, fuel_used) =
            run_in_fresh_store(&self.engine, &self.config, self.budget, call)?;
        let (output, output_len) = decision
            .evidence_output()
            .map_err(|e| PolicyError::OutputInvalid(e.to_string()))?;
        if output_len > self.config.max_output_bytes {
            return Err(PolicyError::OutputOversized {
                bytes: output_len,
                limit: self.config.max_output_bytes,
            });
        }
        check(input, &decision).map_err(PolicyError::OutputInvalid)?;
        Ok(Decided {
            decision,
            evidence: DecisionEvidence {
                kind: self.kind,
                function,
                component_sha256: self.digest,
                wit_package: SUPPORTED_WIT_PACKAGE,
                input_sha256,
                output,
                fuel_used,
            },
        })
    }

    /// Guard policy: may this run proceed?
    pub fn guard_decide(
        &self,
        facts: &guard::GuardFacts,
    ) -> Result<Decided<guard::GuardDecision>, PolicyError> {
        let Prepared::Guard { pre, decide } = &self.prepared else {
            return Err(wrong_kind(self.kind, "decide"));
        };
        let wit_facts = convert::guard::facts_to_wit(facts);
        self.decide(
            "decide",
            facts,
            |store| self.instantiate(pre.instance_pre(), store, |s| pre.instantiate(s)),
            |instance, store| {
                let out =
                    match instance {
                        Instantiated::Checked(bindings) => bindings
                            .dpone_policy_guard()
                            .call_decide(store, &wit_facts)?,
                        // SAFETY: the types are those of the generated `call_decide` above, which
                        // type-checked them on an instance of `pre` before the direct path is taken.
                        #[allow(unsafe_code)]
                        Instantiated::Direct(instance) => unsafe {
                            call_checked_export::<
                                (&wit::guard::GuardFacts,),
                                wit::guard::GuardDecision,
                            >(store, &instance, decide, (&wit_facts,))?
                        },
                    };
                Ok(convert::guard::decision_from_wit(out))
            },
            validate::guard,
        )
    }

    /// Delete-mode policy: the plan for how deletions are recorded.
    pub fn delete_mode_plan(
        &self,
        facts: &delete_mode::DeleteModeFacts,
    ) -> Result<Decided<delete_mode::PlanDecision>, PolicyError> {
        let Prepared::DeleteMode { pre, plan } = &self.prepared else {
            return Err(wrong_kind(self.kind, "plan"));
        };
        let wit_facts = convert::delete_mode::facts_to_wit(facts);
        self.decide(
            "plan",
            facts,
            |store| self.instantiate(pre.instance_pre(), store, |s| pre.instantiate(s)),
            |instance, store| {
                let out = match instance {
                    Instantiated::Checked(bindings) => bindings
                        .dpone_policy_delete_mode()
                        .call_plan(store, &wit_facts)?,
                    // SAFETY: the types are those of the generated `call_plan` above, which
                    // type-checked them on an instance of `pre` before the direct path is taken.
                    #[allow(unsafe_code)]
                    Instantiated::Direct(instance) => unsafe {
                        call_checked_export::<
                            (&wit::delete_mode::DeleteModeFacts,),
                            wit::delete_mode::PlanDecision,
                        >(store, &instance, plan, (&wit_facts,))?
                    },
                };
                Ok(convert::delete_mode::decision_from_wit(out))
            },
            validate::delete_mode,
        )
    }

    /// Admission policy, static rules.
    pub fn admission_static(
        &self,
        facts: &admission::StaticFacts,
    ) -> Result<Decided<admission::StaticDecision>, PolicyError> {
        let Prepared::Admission {
            pre, admit_static, ..
        } = &self.prepared
        else {
            return Err(wrong_kind(self.kind, "admit-static"));
        };
        let wit_facts = convert::admission::static_facts_to_wit(facts);
        self.decide(
            "admit-static",
            facts,
            |store| self.instantiate(pre.instance_pre(), store, |s| pre.instantiate(s)),
            |instance, store| {
                let out = match instance {
                    Instantiated::Checked(bindings) => bindings
                        .dpone_policy_admission()
                        .call_admit_static(store, &wit_facts)?,
                    // SAFETY: the types are those of the generated `call_admit_static` above,
                    // which type-checked them (with every other export of the interface) on an
                    // instance of `pre` before the direct path is taken.
                    #[allow(unsafe_code)]
                    Instantiated::Direct(instance) => unsafe {
                        call_checked_export::<
                            (&wit::admission::StaticFacts,),
                            wit::admission::StaticDecision,
                        >(store, &instance, admit_static, (&wit_facts,))?
                    },
                };
                Ok(convert::admission::static_decision_from_wit(out))
            },
            validate::admission_static,
        )
    }

    /// Admission policy, runtime rules over the complete inventory.
    pub fn admission_runtime(
        &self,
        facts: &admission::RuntimeFacts,
    ) -> Result<Decided<admission::RuntimeDecision>, PolicyError> {
        let Prepared::Admission {
            pre, admit_runtime, ..
        } = &self.prepared
        else {
            return Err(wrong_kind(self.kind, "admit-runtime"));
        };
        let wit_facts = convert::admission::runtime_facts_to_wit(facts);
        self.decide(
            "admit-runtime",
            facts,
            |store| self.instantiate(pre.instance_pre(), store, |s| pre.instantiate(s)),
            |instance, store| {
                let out = match instance {
                    Instantiated::Checked(bindings) => bindings
                        .dpone_policy_admission()
                        .call_admit_runtime(store, &wit_facts)?,
                    // SAFETY: the types are those of the generated `call_admit_runtime` above,
                    // which type-checked them (with every other export of the interface) on an
                    // instance of `pre` before the direct path is taken.
                    #[allow(unsafe_code)]
                    Instantiated::Direct(instance) => unsafe {
                        call_checked_export::<
                            (&wit::admission::RuntimeFacts,),
                            wit::admission::RuntimeDecision,
                        >(store, &instance, admit_runtime, (&wit_facts,))?
                    },
                };
                Ok(convert::admission::runtime_decision_from_wit(out))
            },
            validate::admission_runtime,
        )
    }

    /// Scope policy: is this nonproduction request in scope and within budget?
    pub fn scope_decide(
        &self,
        facts: &scope::ScopeFacts,
    ) -> Result<Decided<scope::ScopeDecision>, PolicyError> {
        let Prepared::Scope { pre, decide } = &self.prepared else {
            return Err(wrong_kind(self.kind, "decide"));
        };
        let wit_facts = convert::scope::facts_to_wit(facts);
        self.decide(
            "decide",
            facts,
            |store| self.instantiate(pre.instance_pre(), store, |s| pre.instantiate(s)),
            |instance, store| {
                let out =
                    match instance {
                        Instantiated::Checked(bindings) => bindings
                            .dpone_policy_scope()
                            .call_decide(store, &wit_facts)?,
                        // SAFETY: the types are those of the generated `call_decide` above, which
                        // type-checked them on an instance of `pre` before the direct path is taken.
                        #[allow(unsafe_code)]
                        Instantiated::Direct(instance) => unsafe {
                            call_checked_export::<
                                (&wit::scope::ScopeFacts,),
                                wit::scope::ScopeDecision,
                            >(store, &instance, decide, (&wit_facts,))?
                        },
                    };
                Ok(convert::scope::decision_from_wit(out))
            },
            validate::scope,
        )
    }

    /// Runs `function` on JSON facts and returns the decision as JSON: the entry point for
    /// `policy eval` and decision tables.
    pub fn decide_json(
        &self,
        function: &str,
        input: &serde_json::Value,
    ) -> Result<Decided<serde_json::Value>, PolicyError> {
        fn parse<T: DeserializeOwned>(
            function: &str,
            input: &serde_json::Value,
        ) -> Result<T, PolicyError> {
            T::deserialize(input).map_err(|e| PolicyError::InputInvalid {
                function: function.to_owned(),
                message: e.to_string(),
            })
        }
        fn to_json<T: Serialize>(d: Decided<T>) -> Result<Decided<serde_json::Value>, PolicyError> {
            Ok(Decided {
                decision: serde_json::to_value(&d.decision)
                    .map_err(|e| PolicyError::OutputInvalid(e.to_string()))?,
                evidence: d.evidence,
            })
        }
        match (self.kind, function) {
            (PolicyKind::Guard, "decide") => to_json(self.guard_decide(&parse(function, input)?)?),
            (PolicyKind::DeleteMode, "plan") => {
                to_json(self.delete_mode_plan(&parse(function, input)?)?)
            }
            (PolicyKind::Admission, "admit-static") => {
                to_json(self.admission_static(&parse(function, input)?)?)
            }
            (PolicyKind::Admission, "admit-runtime") => {
                to_json(self.admission_runtime(&parse(function, input)?)?)
            }
            (PolicyKind::Scope, "decide") => to_json(self.scope_decide(&parse(function, input)?)?),
            (kind, function) => Err(wrong_kind(kind, function)),
        }
    }
}
