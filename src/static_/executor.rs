//! The Executor and the Scope (Paddle's `paddle.static.Executor` and `global_scope()`).
//!
//! A run interprets a program's global block op by op through the registry (the same
//! kernels as eager mode, with no autograd recording). Persistable variables (parameters,
//! optimizer accumulators) live in the [`Scope`] between runs, keyed by name; every other
//! value lives for one run and is dropped right after its last reader. Per program version
//! the executor caches the resolved registry entries, the attributes with the executor's
//! place, and each variable's last reader.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::plan::{self, PlanInfo, PlanKey, PlanSlot};

use super::program::{OpDesc, Program, ProgramData, VarDesc, VarId, VarKind};
use crate::ops::AttrMap;
use crate::ops::registry::{RegisteredOp, find_op};
use crate::{Error, Place, Result, Tensor};

const RUN: &str = "Executor.run";

/// Named values that outlive a run: parameters and optimizer accumulators (Paddle's
/// `Scope`). A cheap handle; clones share the values.
#[derive(Clone, Default)]
pub struct Scope {
    vars: Arc<Mutex<HashMap<String, Tensor>>>,
}

impl Scope {
    /// An empty scope.
    pub fn new() -> Scope {
        Scope::default()
    }

    /// The value of `name` (`scope.find_var(name).get_tensor()`).
    pub fn var(&self, name: &str) -> Option<Tensor> {
        self.lock().get(name).cloned()
    }

    /// Sets `name` (the next run reads it).
    pub fn set_var(&self, name: &str, value: Tensor) {
        self.lock().insert(name.to_string(), value);
    }

    /// Removes `name`.
    pub fn remove_var(&self, name: &str) -> Option<Tensor> {
        self.lock().remove(name)
    }

    /// Every name, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.lock().keys().cloned().collect();
        v.sort();
        v
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Tensor>> {
        self.vars.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The process-wide scope executors use unless given another (`paddle.static.global_scope()`).
pub fn global_scope() -> Scope {
    static GLOBAL: OnceLock<Scope> = OnceLock::new();
    GLOBAL.get_or_init(Scope::new).clone()
}

/// What `fetch_list` takes: a static variable or a variable's name.
pub trait FetchTarget {
    /// The variable's name.
    fn fetch_name(&self) -> Result<String>;
}

impl FetchTarget for Tensor {
    fn fetch_name(&self) -> Result<String> {
        match self.var_ref() {
            Some(v) => Ok(v.program.var_name(v.id)),
            None => Err(Error::invalid(RUN, "fetch_list holds an eager tensor; fetch static variables or names")),
        }
    }
}

impl FetchTarget for &Tensor {
    fn fetch_name(&self) -> Result<String> {
        (*self).fetch_name()
    }
}

impl FetchTarget for &str {
    fn fetch_name(&self) -> Result<String> {
        Ok(self.to_string())
    }
}

impl FetchTarget for String {
    fn fetch_name(&self) -> Result<String> {
        Ok(self.clone())
    }
}

/// A program resolved for running: registry entries, attributes with the executor's place,
/// and each variable's last reader in block 0.
pub(super) struct Compiled {
    pub version: u64,
    pub vars: Vec<VarDesc>,
    names: HashMap<String, VarId>,
    pub blocks: Vec<Vec<Step>>,
    /// Each block's bound parameters and results (control flow).
    block_io: Vec<(Vec<VarId>, Vec<VarId>)>,
    /// For each op of block 0, the variables it reads last (its sub-blocks' reads included).
    frees: Vec<Vec<VarId>>,
    /// Block 0 has no control flow, so a GPU run can follow a plan.
    plannable: bool,
    /// The program after the relu–pooling rewrite and the fusion pass.
    fused: Option<Fusion>,
}

/// A program's fused form: its compilation and the values fusion removes.
struct Fusion {
    compiled: Arc<Compiled>,
    eliminated: HashSet<VarId>,
}

pub(super) struct Step {
    pub desc: OpDesc,
    op: Option<&'static dyn RegisteredOp>,
    attrs: AttrMap,
}

/// Runs programs on one place (`paddle.static.Executor`).
pub struct Executor {
    place: Place,
    scope: Scope,
    cache: Mutex<HashMap<u64, Arc<Compiled>>>,
    plans: Mutex<HashMap<PlanKey, PlanSlot>>,
    planning: AtomicBool,
    fusion: AtomicBool,
    last_plan: Mutex<Option<PlanInfo>>,
    last_interpreted: Mutex<Option<String>>,
}

impl Executor {
    /// An executor on `place` using the [`global_scope`].
    pub fn new(place: Place) -> Executor {
        Executor::with_scope(place, global_scope())
    }

    /// An executor on `place` with its own scope.
    pub fn with_scope(place: Place, scope: Scope) -> Executor {
        let planning = std::env::var("DYGRAPH_PLANS").map_or(true, |v| v != "0");
        Executor {
            place,
            scope,
            cache: Mutex::new(HashMap::new()),
            plans: Mutex::new(HashMap::new()),
            planning: AtomicBool::new(planning),
            fusion: AtomicBool::new(std::env::var("DYGRAPH_FUSION").map_or(true, |v| v != "0")),
            last_plan: Mutex::new(None),
            last_interpreted: Mutex::new(None),
        }
    }

    /// Turns execution plans on or off (on by default; `DYGRAPH_PLANS=0` turns them off):
    /// with plans, a GPU run after the first for the same feed shapes replays the first
    /// run's prepared commands instead of interpreting the program op by op.
    pub fn set_plans(&self, on: bool) {
        self.planning.store(on, Ordering::Relaxed);
        if !on {
            lock(&self.plans).clear();
        }
    }

    /// Turns the fusion pass on or off (on by default; `DYGRAPH_FUSION=0` turns it off):
    /// with it, chains of elementwise ops run as one generated kernel each, and on a GPU
    /// adjacent optimizer updates of the same settings as one merged op (one dispatch).
    pub fn set_fusion(&self, on: bool) {
        self.fusion.store(on, Ordering::Relaxed);
    }

    /// The ops a run of `program` executes, in order, after the fusion pass (when it is on
    /// and no fetched value is one it removes): `fused_elementwise` ops replace chains, and
    /// a `relu` read by a max pooling runs after it.
    pub fn ops_to_run(&self, program: &Program) -> Result<Vec<OpDesc>> {
        let c = self.compile(program)?;
        let c = match &c.fused {
            Some(f) if self.fusion.load(Ordering::Relaxed) => f.compiled.clone(),
            _ => c,
        };
        Ok(c.blocks[0].iter().map(|s| s.desc.clone()).collect())
    }

    /// Entries of this executor's plan cache: one per program and run signature (feed shapes
    /// and dtypes, fetch list, fusion and NaN-check settings) that ran on a GPU place, a plan
    /// or a note that the program is interpreted. At most 16: a seventeenth empties the
    /// cache first.
    pub fn cached_plans(&self) -> usize {
        lock(&self.plans).len()
    }

    /// The plan the last run followed or captured (None when it was interpreted).
    pub fn last_plan(&self) -> Option<PlanInfo> {
        lock(&self.last_plan).clone()
    }

    /// Why the last run was interpreted on a GPU place although plans are on (control flow,
    /// a value read back while running, ...), if it was.
    pub fn interpreted_because(&self) -> Option<String> {
        lock(&self.last_interpreted).clone()
    }

    /// The place ops run on.
    pub fn place(&self) -> Place {
        self.place
    }

    /// The scope holding persistable values.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Runs `program` once: `feed` binds data variables by name (tensors of any place, moved
    /// to the executor's), `fetch_list` names the values returned, in order.
    pub fn run<F: FetchTarget>(
        &self,
        program: &Program,
        feed: &[(&str, &Tensor)],
        fetch_list: &[F],
    ) -> Result<Vec<Tensor>> {
        let fetch: Vec<String> = fetch_list.iter().map(|f| f.fetch_name()).collect::<Result<_>>()?;
        // A program runs the ops it holds: autocast acted when it was built.
        crate::ops::registry::dispatch::autocast::suspended(|| {
            super::eager_inside(|| self.run_named(program, feed, &fetch))
        })
    }

    /// `run` with the fetched values named.
    fn run_named(&self, program: &Program, feed: &[(&str, &Tensor)], fetch: &[String]) -> Result<Vec<Tensor>> {
        let compiled = self.compile(program)?;
        let fetch_ids: Vec<VarId> = fetch
            .iter()
            .map(|n| {
                compiled.names.get(n).copied().ok_or_else(|| {
                    Error::invalid(RUN, format!("fetch_list names {n:?}, which is not a variable of the program"))
                })
            })
            .collect::<Result<_>>()?;
        let mut env: Vec<Option<Tensor>> = vec![None; compiled.vars.len()];
        self.bind_feeds(&compiled, feed, &mut env)?;
        // A run fetching a value fusion removed runs the unfused program.
        let fusion = compiled
            .fused
            .as_ref()
            .filter(|f| self.fusion.load(Ordering::Relaxed) && !fetch_ids.iter().any(|v| f.eliminated.contains(v)))
            // `FLAGS_check_nan_inf` and the CPU shadow check each op by its own name.
            .filter(|_| !crate::flags::checks_by_op_name());
        // After every check: a hook counts optimizer steps.
        let hooks = program.data().hooks.clone();
        for h in &hooks {
            for (name, value) in h.before_run()? {
                self.set_persistable(&name, value)?;
            }
        }
        let compiled = fusion.map_or(compiled.clone(), |f| f.compiled.clone());
        let mut keep = vec![false; compiled.vars.len()];
        for &id in &fetch_ids {
            keep[id] = true;
        }
        let run = Run { exe: self, c: &compiled, keep: &keep, tapes: Default::default() };
        *lock(&self.last_plan) = None;
        *lock(&self.last_interpreted) = None;
        if let Place::Gpu(_) = self.place
            && !compiled.plannable
        {
            *lock(&self.last_interpreted) = Some("the program has control flow".into());
        }
        if let Place::Gpu(index) = self.place
            && compiled.plannable
            && self.planning.load(Ordering::Relaxed)
            && !crate::flags::per_op_checks()
        {
            let feed_ids: Vec<VarId> = feed.iter().filter_map(|(n, _)| compiled.names.get(*n).copied()).collect();
            let key = PlanKey::new(&compiled, program.data().uid, &env, &feed_ids, &fetch_ids, fusion.is_some());
            let cached = lock(&self.plans).get(&key).map(|s| match s {
                PlanSlot::Ready(p) => Ok(p.clone()),
                PlanSlot::Interpreted(why) => Err(why.clone()),
            });
            let slot = match cached {
                Some(Ok(p)) => Some(p),
                Some(Err(why)) => {
                    *lock(&self.last_interpreted) = Some(why);
                    None
                }
                None => {
                    let ctx = crate::backend::gpu::context(index)?;
                    let captured = crate::no_grad(|| plan::capture(&run, &ctx, &mut env, &feed_ids, &fetch_ids))?;
                    return match captured {
                        plan::PlanOutcome::Plan(p) => {
                            let out = p.fetch_copies()?;
                            *lock(&self.last_plan) = Some(p.info.clone());
                            plan::remember(&mut lock(&self.plans), key, PlanSlot::Ready(Arc::new(Mutex::new(p))));
                            Ok(out)
                        }
                        plan::PlanOutcome::Busy => {
                            *lock(&self.last_interpreted) =
                                Some("another thread was capturing a plan on this device".into());
                            crate::no_grad(|| run.block(0, &mut env))?;
                            run.fetch(&fetch_ids, fetch, &env)
                        }
                        plan::PlanOutcome::Interpreted(why) => {
                            *lock(&self.last_interpreted) = Some(why.clone());
                            plan::remember(&mut lock(&self.plans), key, PlanSlot::Interpreted(why));
                            run.fetch(&fetch_ids, fetch, &env)
                        }
                    };
                }
            };
            if let Some(p) = slot {
                let p = lock(&p);
                if let Some(out) = crate::no_grad(|| plan::replay(&p, &run, &env))? {
                    *lock(&self.last_plan) = Some(p.info.clone());
                    return Ok(out);
                }
                drop(p);
                lock(&self.plans).remove(&key);
                return self.run_named(program, feed, fetch);
            }
        }
        if self.place == Place::Cpu {
            let (c, keep, env) = (&*compiled, &keep[..], &mut env);
            // The worker may itself be inside a user's job that builds a program.
            on_cpu_workers(|| {
                super::eager_inside(|| {
                    let run = Run { exe: self, c, keep, tapes: Default::default() };
                    crate::no_grad(|| run.block(0, env))
                })
            })?;
        } else {
            crate::no_grad(|| run.block(0, &mut env))?;
        }
        run.fetch(&fetch_ids, fetch, &env)
    }
}

/// Runs `f` on a worker of the pool the CPU kernels split their work over. Called from
/// another thread, each parallel kernel hands its work to the pool and sleeps until it is
/// done: two thread wake-ups per kernel, about half the calling thread's time on the 2-core
/// MNIST step (`perf`). A whole program run on a worker pays them once, and the worker
/// takes its share of each kernel instead of waiting. While it waits inside a kernel, the
/// worker may run other jobs of the pool (rayon's work stealing); those see the run's
/// thread state: no autograd recording, no program building (ARCHITECTURE.md).
fn on_cpu_workers<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    #[cfg(not(target_arch = "wasm32"))]
    return rayon::scope(|_| f());
    #[cfg(target_arch = "wasm32")]
    f()
}

impl Executor {
    /// Writes a hook's value into the scope: into the tensor there when it has the same
    /// shape and dtype, else as a new value on this executor's place.
    fn set_persistable(&self, name: &str, value: Tensor) -> Result<()> {
        match self.scope.var(name) {
            Some(cur) if cur.shape() == value.shape() && cur.dtype() == value.dtype() => cur.assign_from(&value),
            _ => {
                self.scope.set_var(name, value.to(self.place)?);
                Ok(())
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Run<'_> {
    /// The fetched values, in order.
    fn fetch(&self, fetch_ids: &[VarId], fetch: &[String], env: &[Option<Tensor>]) -> Result<Vec<Tensor>> {
        fetch_ids
            .iter()
            .zip(fetch)
            .map(|(&id, name)| {
                self.value(id, env).map_err(|_| {
                    Error::invalid(
                        RUN,
                        format!("fetch target {name:?} was not computed by this run (no op of the program writes it)"),
                    )
                })
            })
            .collect()
    }

    pub(super) fn compiled(&self) -> &Compiled {
        self.c
    }

    pub(super) fn scope(&self) -> &Scope {
        &self.exe.scope
    }
}

impl Executor {
    fn bind_feeds(&self, c: &Compiled, feed: &[(&str, &Tensor)], env: &mut [Option<Tensor>]) -> Result<()> {
        for (name, t) in feed {
            let id = *c
                .names
                .get(*name)
                .ok_or_else(|| Error::invalid(RUN, format!("feed {name:?} is not a variable of the program")))?;
            let v = &c.vars[id];
            if t.dtype() != v.dtype {
                return Err(Error::invalid(
                    RUN,
                    format!("feed {name:?} is {} but the variable is declared {}", t.dtype(), v.dtype),
                ));
            }
            let fits =
                t.ndim() == v.shape.len() && t.shape().iter().zip(&v.shape).all(|(&a, &d)| d < 0 || a as i64 == d);
            if !fits {
                return Err(Error::invalid(
                    RUN,
                    format!("feed {name:?} has shape {:?} but the variable is declared {:?}", t.shape(), v.shape),
                ));
            }
            if t.is_static_var() || t.is_meta() {
                return Err(Error::invalid(RUN, format!("feed {name:?} must be a tensor with data")));
            }
            let t = if t.place() == self.place { (*t).clone() } else { t.to(self.place)? };
            env[id] = Some(t);
        }
        Ok(())
    }

    fn compile(&self, program: &Program) -> Result<Arc<Compiled>> {
        let (key, version) = {
            let d = program.data();
            (d.uid, d.version)
        };
        if let Some(c) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key)
            && c.version == version
        {
            return Ok(c.clone());
        }
        let c = Arc::new(compile(&program.data(), self.place)?);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: programs that were dropped leave their entries behind.
        if cache.len() >= 64 {
            cache.clear();
        }
        cache.insert(key, c.clone());
        Ok(c)
    }
}

fn compile(d: &ProgramData, place: Place) -> Result<Compiled> {
    if let Some(op) = super::program::training_only_op(d) {
        return Err(Error::invalid(
            RUN,
            format!(
                "this program was cloned for test but its {} op uses batch statistics; build the evaluation \
                 program from the layer in eval() mode",
                op.op_type
            ),
        ));
    }
    let mut c = compile_ops(d, &d.blocks[0].ops, place)?;
    if c.plannable {
        let kinds = super::fusion::Kinds::for_place(place.is_gpu());
        let commuted = kinds.commute.then(|| super::commute::relu_after_max_pool(&d.blocks[0].ops, &d.vars)).flatten();
        let (base, mut eliminated, reshaped) = match commuted {
            Some(cm) => (cm.ops, cm.eliminated, cm.reshaped),
            None => (d.blocks[0].ops.clone(), HashSet::new(), Vec::new()),
        };
        let mut vars = d.vars.clone();
        for &(v, like) in &reshaped {
            vars[v].shape = d.vars[like].shape.clone();
        }
        let mut chains = super::fusion::fuse(&base, &vars, kinds);
        if kinds.merge {
            chains.extend(super::merge::merge_updates(&base, &vars));
        }
        let mut skip = HashSet::new();
        let mut at = HashMap::new();
        for f in &chains {
            skip.extend(f.members.iter().copied());
            at.insert(f.root, f.desc.clone());
        }
        eliminated.extend(chains.iter().flat_map(|f| f.members.iter().flat_map(|&m| base[m].outputs.clone())));
        if !chains.is_empty() || !eliminated.is_empty() {
            let ops: Vec<OpDesc> = (0..base.len())
                .filter(|i| !skip.contains(i))
                .map(|i| at.remove(&i).unwrap_or_else(|| base[i].clone()))
                .collect();
            let mut fused = compile_ops(d, &ops, place)?;
            fused.vars = vars;
            c.fused = Some(Fusion { compiled: Arc::new(fused), eliminated });
        }
    }
    Ok(c)
}

/// Compiles `d` with `block0` as its global block's ops.
fn compile_ops(d: &ProgramData, block0: &[OpDesc], place: Place) -> Result<Compiled> {
    let place_attr = crate::ops::AttrField::to_attr(&place);
    let blocks = d
        .blocks
        .iter()
        .enumerate()
        .map(|(bi, b)| {
            if bi == 0 { block0 } else { &b.ops[..] }
                .iter()
                .map(|o| {
                    let op = if super::control::Control::of(&o.op_type).is_some() {
                        None
                    } else {
                        Some(find_op(&o.op_type)?)
                    };
                    let mut attrs = o.attrs.clone();
                    if attrs.get("place").is_some() {
                        attrs.set("place", place_attr.clone());
                    }
                    Ok(Step { desc: o.clone(), op, attrs })
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    let mut last_use = vec![None; d.vars.len()];
    for (i, op) in block0.iter().enumerate() {
        for &v in op.inputs.iter().chain(&super::program::sub_block_reads(&d.blocks, op)) {
            last_use[v] = Some(i);
        }
    }
    let mut frees = vec![Vec::new(); block0.len()];
    for (v, last) in last_use.iter().enumerate() {
        if let Some(i) = last
            && !d.vars[v].persistable
        {
            frees[*i].push(v);
        }
    }
    let block_io = d.blocks.iter().map(|b| (b.params.clone(), b.results.clone())).collect();
    let plannable = blocks[0].iter().all(|s: &Step| s.op.is_some());
    Ok(Compiled {
        version: d.version,
        vars: d.vars.clone(),
        names: d.names.clone(),
        blocks,
        block_io,
        frees,
        plannable,
        fused: None,
    })
}

/// One run of a compiled program.
pub(super) struct Run<'a> {
    exe: &'a Executor,
    c: &'a Compiled,
    /// Attributes replacing an op's for this run, by (block, op index).
    keep: &'a [bool],
    /// Each taped `while` op's carried values per iteration (by its first output), for its
    /// `while_grad`.
    pub(super) tapes: std::cell::RefCell<HashMap<VarId, Vec<Vec<Tensor>>>>,
}

impl Run<'_> {
    /// The value of `id`: computed or fed this run, else the scope's for persistables.
    pub(super) fn value(&self, id: VarId, env: &[Option<Tensor>]) -> Result<Tensor> {
        if let Some(t) = &env[id] {
            return Ok(t.clone());
        }
        let v = &self.c.vars[id];
        if v.persistable {
            return self.exe.scope.var(&v.name).ok_or_else(|| {
                Error::invalid(
                    RUN,
                    format!(
                        "{} is persistable but the scope holds no value for it: run the startup program first",
                        v.name
                    ),
                )
            });
        }
        if v.kind == VarKind::Data {
            return Err(Error::invalid(RUN, format!("missing feed for data variable {:?}", v.name)));
        }
        Err(Error::invalid(RUN, format!("variable {:?} has no value in this run", v.name)))
    }

    /// Runs block `b`'s ops in order.
    pub(super) fn block(&self, b: usize, env: &mut Vec<Option<Tensor>>) -> Result<()> {
        for (i, step) in self.c.blocks[b].iter().enumerate() {
            match step.op {
                Some(_) => self.step(b, i, env)?,
                None => super::control::run(self, &step.desc, env)?,
            }
            self.free_after(b, i, env);
        }
        Ok(())
    }

    /// The input values of op `i` of block `b`.
    pub(super) fn inputs(&self, b: usize, i: usize, env: &[Option<Tensor>]) -> Result<Vec<Tensor>> {
        self.c.blocks[b][i].desc.inputs.iter().map(|&v| self.value(v, env)).collect()
    }

    /// Runs `inputs` through registry op `i` of block `b` with this run's attributes.
    pub(super) fn call(&self, b: usize, i: usize, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let step = &self.c.blocks[b][i];
        let op = step.op.ok_or_else(|| Error::invalid(RUN, format!("{} is not a registry op", step.desc.op_type)))?;
        let refs: Vec<&Tensor> = inputs.iter().collect();
        let outs = op.run(&refs, &step.attrs)?;
        if outs.len() != step.desc.outputs.len() {
            return Err(Error::invalid(
                op.name(),
                format!("returned {} outputs where the program records {}", outs.len(), step.desc.outputs.len()),
            ));
        }
        Ok(outs)
    }

    /// Runs registry op `i` of block `b`, storing its outputs (persistable ones in the scope).
    pub(super) fn step(&self, b: usize, i: usize, env: &mut [Option<Tensor>]) -> Result<()> {
        let outs = self.call(b, i, &self.inputs(b, i, env)?)?;
        for (&id, t) in self.c.blocks[b][i].desc.outputs.iter().zip(outs) {
            let v = &self.c.vars[id];
            if v.persistable {
                self.exe.scope.set_var(&v.name, t.clone());
            }
            env[id] = Some(t);
        }
        Ok(())
    }

    /// Drops the values op `i` of block 0 read last (sub-blocks keep theirs for the run of
    /// the op that owns them), unless fetched.
    pub(super) fn free_after(&self, b: usize, i: usize, env: &mut [Option<Tensor>]) {
        if b != 0 {
            return;
        }
        for &v in &self.c.frees[i] {
            if !self.keep[v] {
                env[v] = None;
            }
        }
    }

    /// The id of the variable called `name`.
    pub(super) fn id_of(&self, name: &str) -> Option<VarId> {
        self.c.names.get(name).copied()
    }

    /// The variables block `b` binds before it runs.
    pub(super) fn params(&self, b: usize) -> Vec<VarId> {
        self.c.block_io[b].0.clone()
    }

    /// The variables block `b` yields.
    pub(super) fn results(&self, b: usize) -> Vec<VarId> {
        self.c.block_io[b].1.clone()
    }
}
