//! Memory groups (`tally/memcg.h`): a tree of groups with hierarchical
//! limits, charged and uncharged in bytes, with events and memory.stat.

use crate::error::{check, Error, Result};
use crate::stats::FlushMode;
use crate::{c_bytes, c_name, c_text};
use std::os::fd::BorrowedFd;
use std::os::raw::c_long;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use tally_sys as sys;

pub(crate) struct MemInner {
    pub(crate) t: NonNull<sys::tally_memcg_tree>,
}

// SAFETY: every call on a tree is MT-safe (tally/memcg.h) but
// tally_memcg_tree_destroy(), which runs in Drop, once the last Arc is
// gone: every group handle and exporter holds one, so no call on the tree
// runs or follows.
unsafe impl Send for MemInner {}
// SAFETY: as above.
unsafe impl Sync for MemInner {}

impl Drop for MemInner {
    fn drop(&mut self) {
        // SAFETY: the last reference (see above).
        unsafe { sys::tally_memcg_tree_destroy(self.t.as_ptr()) }
    }
}

/// A memory tree with its root group; clones share it.  It lives until
/// its last clone, group handle and exporter are gone, so no handle can
/// outlive it.
#[derive(Clone)]
pub struct MemoryTree {
    pub(crate) inner: Arc<MemInner>,
}

/// Counts of a tree, for tests and tools (`struct tally_memcg_info`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryTreeInfo {
    /// Charges that went to the page counters.
    pub refills: u64,
    /// Drains of a subtree's stocks.
    pub drains: u64,
    /// Charges refused.
    pub refusals: u64,
    /// Live groups, the root included.
    pub groups: u64,
    /// Destroyed groups not yet freed (a handle is still held).
    pub zombies: u64,
    /// Drains that found more bytes uncharged than charged.
    pub underflows: u64,
    /// Whether stocks are taken with restartable sequences.
    pub rseq: bool,
}

impl MemoryTree {
    /// A tree with the default stock batches.
    pub fn new() -> Result<MemoryTree> {
        Self::create(ptr::null())
    }

    /// A tree whose stocks refill by `batch` bytes near a limit and up to
    /// `max_batch` far from it: 1 byte to 1 GiB each, `max_batch` not
    /// below `batch` (the default batch when `batch` is 0); 0 is the
    /// default of either.  `InvalidArgument` otherwise.
    pub fn with_batch(batch: usize, max_batch: usize) -> Result<MemoryTree> {
        let opts = sys::tally_memcg_options {
            domain: ptr::null_mut(),
            batch: c_bytes(batch)?,
            max_batch: c_bytes(max_batch)?,
        };
        Self::create(&opts)
    }

    fn create(opts: *const sys::tally_memcg_options) -> Result<MemoryTree> {
        let mut t = ptr::null_mut();
        // SAFETY: an output pointer and NULL or valid options.
        check(unsafe { sys::tally_memcg_tree_create(&mut t, opts) })?;
        Ok(MemoryTree {
            inner: Arc::new(MemInner {
                t: NonNull::new(t).ok_or(Error::OutOfMemory)?,
            }),
        })
    }

    /// The root group (a process-wide max may be set on it).
    pub fn root(&self) -> MemoryGroup {
        // SAFETY: a live tree; its root is never NULL, lives as long as
        // the tree, and get/put on it are harmless.
        let g = unsafe { sys::tally_memcg_root(self.inner.t.as_ptr()) };
        // SAFETY: as above.
        unsafe { sys::tally_memcg_get(g) };
        MemoryGroup {
            tree: self.inner.clone(),
            g: NonNull::new(g).unwrap(),
        }
    }

    /// The live group at `path` ("a/b"; "" is the root).
    pub fn find(&self, path: &str) -> Result<MemoryGroup> {
        let path = c_name(path)?;
        let mut g = ptr::null_mut();
        // SAFETY: a live tree, a NUL-terminated path; the group comes
        // with a reference, put by the handle's Drop.
        check(unsafe { sys::tally_memcg_find(self.inner.t.as_ptr(), path.as_ptr(), &mut g) })?;
        Ok(MemoryGroup {
            tree: self.inner.clone(),
            g: NonNull::new(g).ok_or(Error::NotFound)?,
        })
    }

    /// The tree's counts.
    pub fn info(&self) -> MemoryTreeInfo {
        let mut i = sys::tally_memcg_info::default();
        // SAFETY: a live tree and an output; only -EINVAL for NULL.
        unsafe { sys::tally_memcg_tree_info(self.inner.t.as_ptr(), &mut i) };
        MemoryTreeInfo {
            refills: i.refills,
            drains: i.drains,
            refusals: i.refusals,
            groups: i.groups,
            zombies: i.zombies,
            underflows: i.underflows,
            rseq: i.rseq != 0,
        }
    }

    /// Whether `g` is a group of this tree.
    pub fn owns(&self, g: &MemoryGroup) -> bool {
        Arc::ptr_eq(&self.inner, &g.tree)
    }
}

/// A memory group's handle: a reference of the C library on the group
/// (`Clone` takes one with `tally_memcg_get()`, `Drop` puts it with
/// `tally_memcg_put()`) and on its tree (an `Arc`).  A destroyed group's
/// handle keeps working: its charges and uncharges go to its nearest live
/// ancestor.
pub struct MemoryGroup {
    tree: Arc<MemInner>,
    g: NonNull<sys::tally_memcg>,
}

// SAFETY: every call on a group is MT-safe in C (tally/memcg.h), get and
// put included; a handle is a counted reference, valid in any thread
// until its put.
unsafe impl Send for MemoryGroup {}
// SAFETY: as above: &MemoryGroup reaches only MT-safe calls.
unsafe impl Sync for MemoryGroup {}

impl Clone for MemoryGroup {
    fn clone(&self) -> MemoryGroup {
        // SAFETY: this handle holds a reference, so the group lives.
        unsafe { sys::tally_memcg_get(self.g.as_ptr()) };
        MemoryGroup {
            tree: self.tree.clone(),
            g: self.g,
        }
    }
}

impl Drop for MemoryGroup {
    fn drop(&mut self) {
        // SAFETY: the handle's own reference, put once; the tree lives
        // (self.tree is dropped after this).
        unsafe { sys::tally_memcg_put(self.g.as_ptr()) }
    }
}

impl std::fmt::Debug for MemoryGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("MemoryGroup")
            .field(&self.path().unwrap_or_else(|_| "(destroyed)".into()))
            .finish()
    }
}

/// Which limit (`enum tally_memcg_limit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LimitKind {
    Min,
    Low,
    High,
    Max,
}

/// The limits of a group, in bytes; [`crate::UNLIMITED`] for none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Hard protection from reclaim.
    pub min: usize,
    /// Best-effort protection from reclaim.
    pub low: usize,
    /// Throttling: charges above it succeed with [`Charged::OverHigh`].
    pub high: usize,
    /// Hard limit: no charge without `NOFAIL` takes the usage above it.
    pub max: usize,
}

/// Charge flags (`TALLY_MEMCG_NOFAIL`, ...), combined with `|`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChargeFlags(u32);

impl ChargeFlags {
    /// No flag: may drain, reclaim and run the OOM policy, then fail.
    pub const NONE: ChargeFlags = ChargeFlags(0);
    /// Always succeed, even over max.
    pub const NOFAIL: ChargeFlags = ChargeFlags(sys::TALLY_MEMCG_NOFAIL);
    /// On a refusal, no reclaim callback nor OOM policy.
    pub const NORECLAIM: ChargeFlags = ChargeFlags(sys::TALLY_MEMCG_NORECLAIM);
    /// Never take a lock, sleep or call a callback: `WouldBlock` instead.
    pub const NOBLOCK: ChargeFlags = ChargeFlags(sys::TALLY_MEMCG_NOBLOCK);
}

impl std::ops::BitOr for ChargeFlags {
    type Output = ChargeFlags;
    fn bitor(self, o: ChargeFlags) -> ChargeFlags {
        ChargeFlags(self.0 | o.0)
    }
}

/// A charge that succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Charged {
    /// Every level is at or under its high.
    UnderHigh,
    /// Some level is now above its high.
    OverHigh,
}

/// How a usage is read (`enum tally_memcg_read_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadMode {
    /// One load of the page counter (stock reservations included).
    Approx,
    /// The page counter minus the subtree's stocks.
    Precise,
    /// Drains the subtree's stocks first: exact at quiescence.
    Drain,
}

/// A usage and the interval that holds the exact usage at quiescence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// The value read.
    pub value: usize,
    /// The exact usage is at least this...
    pub min: usize,
    /// ...and at most this.
    pub max: usize,
}

/// A memory.stat item (`enum tally_memcg_stat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum MemoryStat {
    Anon,
    File,
    Kernel,
    KernelStack,
    Pagetables,
    Sock,
    Shmem,
    FileMapped,
    FileDirty,
    FileWriteback,
    SlabReclaimable,
    SlabUnreclaimable,
    /// An event count.
    Pgfault,
    /// An event count.
    Pgmajfault,
}

impl MemoryStat {
    fn raw(self) -> sys::tally_memcg_stat {
        self as sys::tally_memcg_stat
    }

    /// The memory.stat name ("anon").
    pub fn name(self) -> &'static str {
        // SAFETY: a known item: a static NUL-terminated name.
        let p = unsafe { sys::tally_memcg_stat_name(self.raw()) };
        // SAFETY: as above.
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_str()
            .unwrap_or("")
    }
}

/// memory.events counts (`enum tally_memcg_event`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryEvents {
    /// Reclaim took memory under the effective low.
    pub low: u64,
    /// A charge left the usage above high.
    pub high: u64,
    /// A charge did not fit under max.
    pub max: u64,
    /// A charge was still refused after reclaim: the OOM policy ran.
    pub oom: u64,
    /// A task was chosen by an OOM kill.
    pub oom_kill: u64,
}

impl MemoryEvents {
    fn from_raw(v: &[c_long; sys::TALLY_MEMCG_NR_EVENTS as usize]) -> MemoryEvents {
        MemoryEvents {
            low: v[sys::TALLY_MEMCG_EVENT_LOW as usize] as u64,
            high: v[sys::TALLY_MEMCG_EVENT_HIGH as usize] as u64,
            max: v[sys::TALLY_MEMCG_EVENT_MAX as usize] as u64,
            oom: v[sys::TALLY_MEMCG_EVENT_OOM as usize] as u64,
            oom_kill: v[sys::TALLY_MEMCG_EVENT_OOM_KILL as usize] as u64,
        }
    }
}

/// What [`MemoryGroup::render`] writes (`enum tally_memcg_file`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryFile {
    /// memory.stat.
    Stat,
    /// memory.events (hierarchical).
    Events,
    /// memory.events.local.
    EventsLocal,
    /// memory.current, min, low, high, max, peak.
    Limits,
    /// All of the above as one JSON object.
    All,
}

impl MemoryGroup {
    /// A child group without limits (1 to 255 bytes, no '/').
    pub fn create(&self, name: &str) -> Result<MemoryGroup> {
        let name = c_name(name)?;
        let mut g = ptr::null_mut();
        // SAFETY: a referenced group, a NUL-terminated name; the new
        // group comes with a reference, put by the handle's Drop.
        check(unsafe { sys::tally_memcg_create(self.g.as_ptr(), name.as_ptr(), &mut g) })?;
        Ok(MemoryGroup {
            tree: self.tree.clone(),
            g: NonNull::new(g).ok_or(Error::OutOfMemory)?,
        })
    }

    /// Takes the group offline: its charge and local events move to its
    /// parent, its name is free again; handles keep working on the
    /// nearest live ancestor.  `Busy` while it has children,
    /// `InvalidArgument` for the root or a group destroyed already.
    pub fn destroy(&self) -> Result<()> {
        // SAFETY: a referenced group.
        check(unsafe { sys::tally_memcg_destroy(self.g.as_ptr()) }).map(|_| ())
    }

    /// The path from the root ("" for the root); `InvalidArgument` once
    /// destroyed.
    pub fn path(&self) -> Result<String> {
        // SAFETY: a referenced group, a buffer of len bytes.
        c_text(|buf, len| unsafe { sys::tally_memcg_path(self.g.as_ptr(), buf, len) }.into())
    }

    fn set(&self, which: LimitKind, bytes: usize) -> Result<()> {
        let which = match which {
            LimitKind::Min => sys::TALLY_MEMCG_MIN,
            LimitKind::Low => sys::TALLY_MEMCG_LOW,
            LimitKind::High => sys::TALLY_MEMCG_HIGH,
            LimitKind::Max => sys::TALLY_MEMCG_MAX,
        };
        let bytes = c_bytes(bytes)?;
        // SAFETY: a referenced group.
        check(unsafe { sys::tally_memcg_set_limit(self.g.as_ptr(), which, bytes) }).map(|_| ())
    }

    /// Sets max (0 to [`crate::UNLIMITED`]); `Busy` when the usage stays
    /// above it after a drain and reclaim (the old max is kept).
    pub fn set_max(&self, bytes: usize) -> Result<()> {
        self.set(LimitKind::Max, bytes)
    }

    /// Sets high (0 to [`crate::UNLIMITED`]).
    pub fn set_high(&self, bytes: usize) -> Result<()> {
        self.set(LimitKind::High, bytes)
    }

    /// Sets low (0 to [`crate::UNLIMITED`]).
    pub fn set_low(&self, bytes: usize) -> Result<()> {
        self.set(LimitKind::Low, bytes)
    }

    /// Sets min (0 to [`crate::UNLIMITED`]).
    pub fn set_min(&self, bytes: usize) -> Result<()> {
        self.set(LimitKind::Min, bytes)
    }

    /// The limits.
    pub fn limits(&self) -> Limits {
        let mut l = sys::tally_memcg_limits::default();
        // SAFETY: a referenced group and an output (only -EINVAL for
        // NULL).
        unsafe { sys::tally_memcg_get_limits(self.g.as_ptr(), &mut l) };
        Limits {
            min: l.min as usize,
            low: l.low as usize,
            high: l.high as usize,
            max: l.max as usize,
        }
    }

    /// Charges `bytes` (1 to [`crate::BYTES_MAX`]) to the group and its
    /// ancestors: `LimitExceeded` when some level's max would be crossed
    /// (nothing charged), `InvalidArgument` for a size out of range.
    pub fn charge(&self, bytes: usize, flags: ChargeFlags) -> Result<Charged> {
        let bytes = c_bytes(bytes)?;
        // SAFETY: a referenced group.
        let rc = unsafe { sys::tally_memcg_charge_extern(self.g.as_ptr(), bytes, flags.0) };
        match rc {
            0 => Ok(Charged::UnderHigh),
            sys::TALLY_MEMCG_OVER_HIGH => Ok(Charged::OverHigh),
            e => Err(Error::from_errno(e.into(), true)),
        }
    }

    /// Gives back `bytes` charged to this group (1 to
    /// [`crate::BYTES_MAX`]); `Underflow` when more than was charged
    /// reaches the page counters.
    pub fn uncharge(&self, bytes: usize) -> Result<()> {
        let bytes = c_bytes(bytes)?;
        // SAFETY: a referenced group.
        check(unsafe { sys::tally_memcg_uncharge_extern(self.g.as_ptr(), bytes) }).map(|_| ())
    }

    /// The usage of the group's subtree (memory.current).
    pub fn usage(&self, mode: ReadMode) -> Usage {
        let mode = match mode {
            ReadMode::Approx => sys::TALLY_MEMCG_READ_APPROX,
            ReadMode::Precise => sys::TALLY_MEMCG_READ_PRECISE,
            ReadMode::Drain => sys::TALLY_MEMCG_READ_DRAIN,
        };
        let mut r = sys::tally_memcg_range::default();
        // SAFETY: a referenced group, a known mode, an output (only
        // -EINVAL for NULL or an unknown mode).
        unsafe { sys::tally_memcg_usage(self.g.as_ptr(), mode, &mut r) };
        Usage {
            value: r.value.max(0) as usize,
            min: r.min.max(0) as usize,
            max: r.max.max(0) as usize,
        }
    }

    /// The highest usage of the page counter (memory.peak); `reset` sets
    /// it to the current usage after reading.
    pub fn peak(&self, reset: bool) -> usize {
        // SAFETY: a referenced group.
        unsafe { sys::tally_memcg_peak(self.g.as_ptr(), reset) }.max(0) as usize
    }

    /// Gives every CPU's stock of the subtree back to the page counters.
    pub fn drain(&self) {
        // SAFETY: a referenced group (only -EINVAL for NULL).
        unsafe { sys::tally_memcg_drain(self.g.as_ptr()) };
    }

    /// Adds to a memory.stat item (`InvalidArgument` for a negative event
    /// delta).
    pub fn stat_add(&self, item: MemoryStat, delta: i64) -> Result<()> {
        // SAFETY: a referenced group, a known item.
        check(unsafe { sys::tally_memcg_stat_mod(self.g.as_ptr(), item.raw(), delta) }).map(|_| ())
    }

    /// A memory.stat item: hierarchical and local values.
    pub fn stat(&self, item: MemoryStat, mode: FlushMode) -> Result<(i64, i64)> {
        let (mut hier, mut local) = (0, 0);
        // SAFETY: a referenced group, a known item, two outputs.
        check(unsafe {
            sys::tally_memcg_stat_read(
                self.g.as_ptr(),
                item.raw(),
                mode.raw(),
                &mut hier,
                &mut local,
            )
        })?;
        Ok((hier, local))
    }

    /// memory.events (the group and its descendants) and
    /// memory.events.local (the group alone).
    pub fn events(&self) -> (MemoryEvents, MemoryEvents) {
        let mut hier = [0; sys::TALLY_MEMCG_NR_EVENTS as usize];
        let mut local = [0; sys::TALLY_MEMCG_NR_EVENTS as usize];
        // SAFETY: a referenced group, two arrays of NR_EVENTS counts.
        unsafe { sys::tally_memcg_events(self.g.as_ptr(), hier.as_mut_ptr(), local.as_mut_ptr()) };
        (
            MemoryEvents::from_raw(&hier),
            MemoryEvents::from_raw(&local),
        )
    }

    /// An eventfd that becomes readable when the group's memory.events
    /// change (owned by the group: do not close it).
    pub fn events_fd(&self) -> Result<BorrowedFd<'_>> {
        // SAFETY: a referenced group.
        let fd = check(unsafe { sys::tally_memcg_events_fd(self.g.as_ptr()) })?;
        // SAFETY: the descriptor stays open until the tree is destroyed,
        // which this handle's borrow outlasts.
        Ok(unsafe { BorrowedFd::borrow_raw(fd) })
    }

    /// A memory file of the group as text, or JSON when `json`.
    pub fn render(&self, file: MemoryFile, json: bool) -> Result<String> {
        let file = match file {
            MemoryFile::Stat => sys::TALLY_MEMCG_FILE_STAT,
            MemoryFile::Events => sys::TALLY_MEMCG_FILE_EVENTS,
            MemoryFile::EventsLocal => sys::TALLY_MEMCG_FILE_EVENTS_LOCAL,
            MemoryFile::Limits => sys::TALLY_MEMCG_FILE_LIMITS,
            MemoryFile::All => sys::TALLY_MEMCG_FILE_ALL,
        };
        // SAFETY: a referenced group, a buffer of len bytes.
        c_text(|buf, len| {
            unsafe { sys::tally_memcg_render(self.g.as_ptr(), file, json, buf, len) }.into()
        })
    }

    /// Runs `f` with this group as the calling thread's current group
    /// (what C code charging "the current group", such as the jemalloc
    /// integration, charges), restoring the previous one after, also
    /// when `f` panics.  The scope holds a reference on the group.
    pub fn with_current<R>(&self, f: impl FnOnce() -> R) -> R {
        let _scope = CurrentGroup::enter(self.clone());
        f()
    }

    /// Whether this group is the calling thread's current group.
    pub fn is_current(&self) -> bool {
        // SAFETY: reads a thread-local and a global pointer.
        unsafe { sys::tally_memcg_current() == self.g.as_ptr() }
    }

    /// Whether two handles name the same group.
    pub fn same_group(&self, other: &MemoryGroup) -> bool {
        self.g == other.g
    }
}

/// The scope of [`MemoryGroup::with_current`]: sets the thread's current
/// group and restores the previous one when dropped.  Private and built
/// only by `with_current()`, so scopes nest strictly and stay on their
/// thread: a restore always puts back what the enclosing scope set, and
/// the group it holds a reference on is current only while it holds it.
struct CurrentGroup {
    /// The reference that keeps the group alive while it is current.
    _group: MemoryGroup,
    prev: *mut sys::tally_memcg,
}

impl CurrentGroup {
    fn enter(group: MemoryGroup) -> CurrentGroup {
        // SAFETY: a thread-local store; the group stays referenced by
        // this scope for as long as it is current.
        let prev = unsafe { sys::tally_memcg_set_current(group.g.as_ptr()) };
        CurrentGroup {
            _group: group,
            prev,
        }
    }
}

impl Drop for CurrentGroup {
    fn drop(&mut self) {
        // SAFETY: a thread-local store of what was current before.
        unsafe { sys::tally_memcg_set_current(self.prev) };
    }
}
