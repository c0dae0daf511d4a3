//! A DataFusion [`MemoryPool`] on a tally memory tree: hierarchical limits
//! per query and per consumer, exact accounting, Prometheus metrics.
//!
//! The pool is a memory group with the runtime's limit.  Every consumer
//! DataFusion registers gets a group of its own under it, or under a
//! query's group when registered through a [`TallyMemoryPool::for_query`]
//! handle, which has a max of its own:
//!
//! ```text
//!   root
//!   └── datafusion              pool max (the whole process's queries)
//!       ├── q1                  q1's max
//!       │   ├── ExternalSorter[0]#17
//!       │   └── GroupedHashAggregateStream[1]#18
//!       └── q2                  q2's max
//!           └── ...
//! ```
//!
//! `try_grow` is a charge of the consumer's group, which tally refuses
//! when any level of the chain would cross its max (after draining the
//! per-CPU stocks: a refusal is exact); `grow` is a charge that cannot
//! fail; `shrink` an uncharge; `unregister` destroys the consumer's group.
//! A charge served by the current CPU's stock costs one restartable
//! sequence, without a shared atomic.
//!
//! Finding the consumer's group takes a lock of one of 64 shards of the
//! consumer table (consumers are spread over them by id), held across
//! the charge: two consumers contend only when they share a shard.

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tally::{ChargeFlags, Error, ExportFormat, Exporter, MemoryGroup, MemoryTree, ReadMode};

const SHARDS: usize = 64;
/// The most pieces a `grow()` larger than a max is charged in.
const GROW_PIECES: usize = 4096;

/// One registered consumer.
struct Consumer {
    group: MemoryGroup,
    name: String,
    /// Where it was registered: the pool's or a query's group.
    parent: MemoryGroup,
    /// Registrations of this id (DataFusion makes one; a caller may
    /// register an id again).
    registrations: usize,
    /// Bytes granted to it: charged, plus `overflow`.
    reserved: usize,
    /// Bytes `grow()` granted that no charge could hold (larger than
    /// some max of the chain): counted here, given back first.
    overflow: usize,
}

/// The hash of a consumer id: ids are DataFusion's counter, unique and
/// not chosen by an adversary, so a multiplication spreads them (the
/// default SipHash costs more than the charge itself).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_usize(&mut self, id: usize) {
        self.0 = (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type ConsumerTable = HashMap<usize, Consumer, BuildHasherDefault<IdHasher>>;

/// A shard of the consumer table, on a cache line of its own.
#[repr(align(128))]
#[derive(Default)]
struct Shard(Mutex<ConsumerTable>);

struct Shared {
    tree: MemoryTree,
    pool: MemoryGroup,
    shards: Box<[Shard]>,
    /// Sum of the consumers' `overflow`.
    overflow: AtomicUsize,
    exporter: Mutex<Exporter>,
}

impl Shared {
    fn shard(&self, id: usize) -> MutexGuard<'_, ConsumerTable> {
        // A panic under the lock leaves the table consistent (each
        // update is one insert, remove or field write): keep using it.
        self.shards[id % SHARDS]
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

/// A query's group: destroyed when its last pool handle goes.
struct Scope {
    group: MemoryGroup,
    owned: bool,
}

impl Drop for Scope {
    fn drop(&mut self) {
        if self.owned {
            // Its consumers are gone (each held this handle through its
            // reservation's pool): no child is left, nothing is charged.
            let _ = self.group.destroy();
        }
    }
}

/// A [`MemoryPool`] on a tally memory tree.  Clones and
/// [`for_query`](TallyMemoryPool::for_query) handles share the tree and
/// the consumer table.
#[derive(Clone)]
pub struct TallyMemoryPool {
    shared: Arc<Shared>,
    scope: Arc<Scope>,
}

fn tally_err(what: &str, e: Error) -> DataFusionError {
    DataFusionError::Execution(format!("tally: {what}: {e}"))
}

/// A group name for a consumer: its name and id ("ExternalSorter[0]#17"),
/// '/' replaced, at most 255 bytes.
fn consumer_group_name(c: &MemoryConsumer) -> String {
    let suffix = format!("#{}", c.id());
    let mut name: String = c.name().replace('/', "_");
    let room = 255 - suffix.len();
    if name.len() > room {
        let mut cut = room;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
    }
    if name.is_empty() {
        name.push_str("consumer");
    }
    name + &suffix
}

fn human(bytes: usize) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn limit_text(max: usize) -> String {
    if max == tally::UNLIMITED {
        "no limit".into()
    } else {
        human(max)
    }
}

impl TallyMemoryPool {
    /// A pool of at most `max` bytes ([`tally::UNLIMITED`] for none), the
    /// group "datafusion" of a tree of its own.
    pub fn new(max: usize) -> Result<TallyMemoryPool> {
        let tree = MemoryTree::new().map_err(|e| tally_err("memory tree", e))?;
        Self::in_tree(&tree, "datafusion", max)
    }

    /// A pool of at most `max` bytes, the group `name` under the root of
    /// `tree` (a program's own tree, with its other groups).
    pub fn in_tree(tree: &MemoryTree, name: &str, max: usize) -> Result<TallyMemoryPool> {
        let pool = tree
            .root()
            .create(name)
            .map_err(|e| tally_err(&format!("pool group {name:?}"), e))?;
        if let Err(e) = pool.set_max(max) {
            let _ = pool.destroy();
            return Err(tally_err("pool max", e));
        }
        let mut exporter = Exporter::new(&[]).map_err(|e| tally_err("exporter", e))?;
        exporter
            .add_memory(tree, "datafusion", false)
            .map_err(|e| tally_err("exporter", e))?;
        let shared = Arc::new(Shared {
            tree: tree.clone(),
            pool: pool.clone(),
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            overflow: AtomicUsize::new(0),
            exporter: Mutex::new(exporter),
        });
        Ok(TallyMemoryPool {
            shared,
            scope: Arc::new(Scope {
                group: pool,
                owned: true,
            }),
        })
    }

    /// A handle on the same pool for one query: its consumers go under a
    /// new group `name` of the pool with a max of its own (the pool's max
    /// still holds all queries together).  The query's group is destroyed
    /// when this handle, its clones and every reservation made through
    /// them are gone.
    pub fn for_query(&self, name: &str, max: usize) -> Result<TallyMemoryPool> {
        let group = self
            .shared
            .pool
            .create(name)
            .map_err(|e| tally_err(&format!("query group {name:?}"), e))?;
        if let Err(e) = group.set_max(max) {
            let _ = group.destroy();
            return Err(tally_err("query max", e));
        }
        Ok(TallyMemoryPool {
            shared: self.shared.clone(),
            scope: Arc::new(Scope { group, owned: true }),
        })
    }

    /// The memory tree (to read it, export it, or add groups of its own).
    pub fn tree(&self) -> &MemoryTree {
        &self.shared.tree
    }

    /// This handle's group: the pool's, or the query's.
    pub fn group(&self) -> &MemoryGroup {
        &self.scope.group
    }

    /// The pool's group.
    pub fn pool_group(&self) -> &MemoryGroup {
        &self.shared.pool
    }

    /// The Prometheus (or OpenMetrics) text of the tree: per group
    /// (pool, queries, consumers) usage, peak, limits and events.
    pub fn metrics(&self, format: ExportFormat) -> Result<String> {
        let mut e = self
            .shared
            .exporter
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        e.render(format).map_err(|e| tally_err("export", e))
    }

    /// The consumers registered through any handle of this pool, largest
    /// first: (group path, bytes reserved).
    pub fn consumers(&self) -> Vec<(String, usize)> {
        let mut v = Vec::new();
        for s in 0..SHARDS {
            for c in self.shared.shard(s).values() {
                let path = c.group.path().unwrap_or_else(|_| c.name.clone());
                v.push((path, c.reserved));
            }
        }
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// The chain from `group` up to the root: the groups whose max a
    /// charge of `group` must fit.
    fn chain(&self, group: &MemoryGroup) -> Vec<MemoryGroup> {
        let mut chain = vec![group.clone()];
        let mut path = group.path().unwrap_or_default();
        while let Some(i) = path.rfind('/') {
            path.truncate(i);
            match self.shared.tree.find(&path) {
                Ok(g) => chain.push(g),
                Err(_) => break,
            }
        }
        let root = self.shared.tree.root();
        if !chain.last().is_some_and(|g| g.same_group(&root)) {
            chain.push(root);
        }
        chain
    }

    /// Charges `bytes` that `grow()` granted.  A charge larger than some
    /// max of the chain is refused even with `NOFAIL`: such bytes are
    /// charged in pieces of the chain's smallest max (at most
    /// `GROW_PIECES` of them), so that the levels see them and refuse
    /// later `try_grow()`s until they come back under.  Returns the bytes
    /// no charge could hold (a max of 0, a grow larger than
    /// `GROW_PIECES` times that max, or than [`tally::BYTES_MAX`]).
    fn charge_granted(&self, group: &MemoryGroup, bytes: usize) -> usize {
        match group.charge(bytes, ChargeFlags::NOFAIL) {
            Ok(_) => return 0,
            Err(Error::TooBig) | Err(Error::InvalidArgument) => {}
            Err(_) => return bytes,
        }
        let smallest = self
            .chain(group)
            .iter()
            .map(|g| g.limits().max)
            .min()
            .unwrap_or(tally::UNLIMITED);
        let piece = smallest.min(tally::BYTES_MAX);
        let mut left = bytes;
        for _ in 0..GROW_PIECES {
            if left == 0 || piece == 0 {
                break;
            }
            let n = piece.min(left);
            if group.charge(n, ChargeFlags::NOFAIL).is_err() {
                break;
            }
            left -= n;
        }
        left
    }

    /// The error of a refused charge: the level that refused (its path,
    /// usage and max) and the largest consumers.
    fn refusal(
        &self,
        r: &MemoryReservation,
        group: &MemoryGroup,
        additional: usize,
    ) -> DataFusionError {
        if additional > tally::BYTES_MAX {
            return DataFusionError::ResourcesExhausted(format!(
                "Failed to allocate additional {} for {}: larger than any charge \
                 tally accepts ({})",
                human(additional),
                r.consumer().name(),
                human(tally::BYTES_MAX)
            ));
        }
        // The refusing level is one whose usage plus the charge does not
        // fit its max: the consumer's, the query's, the pool's or an
        // ancestor's, up to the root.  Usage moves while this is read
        // (others free): failing that, the level with the least room.
        let chain = self.chain(group);
        let room = |g: &MemoryGroup| {
            let max = g.limits().max;
            (max != tally::UNLIMITED).then(|| max.saturating_sub(g.usage(ReadMode::Precise).value))
        };
        let level = chain
            .iter()
            .find(|g| room(g).is_some_and(|r| r < additional))
            .or_else(|| {
                chain
                    .iter()
                    .filter_map(|g| room(g).map(|r| (r, g)))
                    .min_by_key(|&(r, _)| r)
                    .map(|(_, g)| g)
            })
            .unwrap_or_else(|| chain.last().unwrap());
        let usage = level.usage(ReadMode::Precise).value;
        let top: Vec<String> = self
            .consumers()
            .into_iter()
            .take(3)
            .map(|(p, b)| format!("{p}: {}", human(b)))
            .collect();
        let name = level.path().unwrap_or_default();
        DataFusionError::ResourcesExhausted(format!(
            "Failed to allocate additional {} for {} with {} already allocated for this \
             reservation - group {} is at {} of its limit {}; largest consumers: {}",
            human(additional),
            r.consumer().name(),
            human(r.size()),
            if name.is_empty() { "/" } else { &name },
            human(usage),
            limit_text(level.limits().max),
            if top.is_empty() {
                "none".into()
            } else {
                top.join(", ")
            }
        ))
    }
}

impl fmt::Debug for TallyMemoryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TallyMemoryPool")
            .field("group", &self.scope.group)
            .field("reserved", &self.reserved())
            .finish()
    }
}

impl fmt::Display for TallyMemoryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TallyMemoryPool({}: {} of {})",
            self.scope.group.path().unwrap_or_default(),
            human(self.reserved()),
            limit_text(self.scope.group.limits().max)
        )
    }
}

impl MemoryPool for TallyMemoryPool {
    fn name(&self) -> &str {
        "TallyMemoryPool"
    }

    fn register(&self, consumer: &MemoryConsumer) {
        let id = consumer.id();
        let mut shard = self.shared.shard(id);
        if let Some(c) = shard.get_mut(&id) {
            c.registrations += 1;
            return;
        }
        let parent = self.scope.group.clone();
        // A name is unique (it ends with the unique id); should the tree
        // refuse the group (out of memory), the consumer is charged to
        // its parent directly.
        let group = parent
            .create(&consumer_group_name(consumer))
            .unwrap_or_else(|_| parent.clone());
        shard.insert(
            id,
            Consumer {
                group,
                name: consumer.name().to_owned(),
                parent,
                registrations: 1,
                reserved: 0,
                overflow: 0,
            },
        );
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        let id = consumer.id();
        let gone = {
            let mut shard = self.shared.shard(id);
            match shard.get_mut(&id) {
                Some(c) if c.registrations > 1 => {
                    c.registrations -= 1;
                    None
                }
                Some(_) => shard.remove(&id),
                None => None,
            }
        };
        if let Some(c) = gone {
            // What it still holds moves to its parent with the destroy;
            // give it back there (DataFusion frees before unregistering,
            // so this is 0 but for a caller that did not).
            let charged = c.reserved - c.overflow;
            self.shared
                .overflow
                .fetch_sub(c.overflow, Ordering::Relaxed);
            if !c.group.same_group(&c.parent) {
                let _ = c.group.destroy();
            }
            if charged > 0 {
                let _ = c.parent.uncharge(charged);
            }
        }
    }

    fn grow(&self, r: &MemoryReservation, additional: usize) {
        if additional == 0 {
            return;
        }
        let id = r.consumer().id();
        let mut shard = self.shared.shard(id);
        let Some(c) = shard.get_mut(&id) else {
            drop(shard);
            // Not registered here: charge the handle's group.
            let _ = self.charge_granted(&self.scope.group, additional);
            return;
        };
        // Granted all the same, as the trait requires; what no charge
        // could hold is counted apart so that reserved() and shrink()
        // stay exact.
        let apart = self.charge_granted(&c.group, additional);
        if apart > 0 {
            c.overflow += apart;
            self.shared.overflow.fetch_add(apart, Ordering::Relaxed);
        }
        c.reserved += additional;
    }

    fn shrink(&self, r: &MemoryReservation, shrink: usize) {
        if shrink == 0 {
            return;
        }
        let id = r.consumer().id();
        let mut shard = self.shared.shard(id);
        let Some(c) = shard.get_mut(&id) else {
            drop(shard);
            let _ = self.scope.group.uncharge(shrink);
            return;
        };
        let from_overflow = c.overflow.min(shrink);
        c.overflow -= from_overflow;
        c.reserved = c.reserved.saturating_sub(shrink);
        if from_overflow > 0 {
            self.shared
                .overflow
                .fetch_sub(from_overflow, Ordering::Relaxed);
        }
        if shrink > from_overflow {
            let _ = c.group.uncharge(shrink - from_overflow);
        }
    }

    fn try_grow(&self, r: &MemoryReservation, additional: usize) -> Result<()> {
        if additional == 0 {
            return Ok(());
        }
        let id = r.consumer().id();
        let mut shard = self.shared.shard(id);
        let group = match shard.get_mut(&id) {
            Some(c) => match c.group.charge(additional, ChargeFlags::NONE) {
                Ok(_) => {
                    c.reserved += additional;
                    return Ok(());
                }
                Err(_) => c.group.clone(),
            },
            None => {
                drop(shard);
                return match self.scope.group.charge(additional, ChargeFlags::NONE) {
                    Ok(_) => Ok(()),
                    Err(_) => Err(self.refusal(r, &self.scope.group, additional)),
                };
            }
        };
        drop(shard);
        Err(self.refusal(r, &group, additional))
    }

    fn reserved(&self) -> usize {
        // The handle's group (the pool's or a query's), without the bytes
        // the per-CPU stocks hold in advance.
        let overflow = if self.scope.group.same_group(&self.shared.pool) {
            self.shared.overflow.load(Ordering::Relaxed)
        } else {
            0
        };
        self.scope.group.usage(ReadMode::Precise).value + overflow
    }

    fn memory_limit(&self) -> MemoryLimit {
        // The smallest max of the chain: the query's, the pool's and
        // those above it.
        let max = self
            .chain(&self.scope.group)
            .iter()
            .map(|g| g.limits().max)
            .min()
            .unwrap_or(tally::UNLIMITED);
        if max == tally::UNLIMITED {
            MemoryLimit::Infinite
        } else {
            MemoryLimit::Finite(max)
        }
    }
}
