//! A statistics tree (`tally/stats.h`): groups with per-CPU statistics,
//! flushed lazily.

use crate::error::{check, Error, Result};
use crate::{c_name, c_text};
use std::ffi::CString;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use tally_sys as sys;

/// What a stat counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatKind {
    /// A level that goes up and down.
    State,
    /// A count of events: a negative delta is refused.
    Event,
}

/// What a read does before reading (`enum tally_flush_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushMode {
    /// Flush when the group is over its threshold.
    IfNeeded,
    /// Flush: the value reflects every update before the read.
    Force,
    /// Flush only when the periodic flusher is a period late.
    Ratelimited,
    /// Read what was last flushed.
    None,
}

impl FlushMode {
    pub(crate) fn raw(self) -> sys::tally_flush_mode {
        match self {
            FlushMode::IfNeeded => sys::TALLY_FLUSH_IF_NEEDED,
            FlushMode::Force => sys::TALLY_FLUSH_FORCE,
            FlushMode::Ratelimited => sys::TALLY_FLUSH_RATELIMITED,
            FlushMode::None => sys::TALLY_FLUSH_NONE,
        }
    }
}

pub(crate) struct StatsInner {
    pub(crate) t: NonNull<sys::tally_stats_tree>,
}

// SAFETY: a tree's calls are MT-safe (tally/stats.h), but destroy, which
// runs in Drop once the last Arc (every group handle holds one) is gone.
unsafe impl Send for StatsInner {}
// SAFETY: as above.
unsafe impl Sync for StatsInner {}

impl Drop for StatsInner {
    fn drop(&mut self) {
        // SAFETY: the last reference: no call on the tree runs or follows.
        unsafe { sys::tally_stats_tree_destroy(self.t.as_ptr()) }
    }
}

/// A statistics tree; clones share it.  It lives until its last clone
/// and its last group handle are dropped.
#[derive(Clone)]
pub struct StatsTree {
    pub(crate) inner: Arc<StatsInner>,
}

impl StatsTree {
    /// A tree whose groups each have the stats of `schema` (1 to 256
    /// distinct names without white space).
    pub fn new(schema: &[(&str, StatKind)]) -> Result<StatsTree> {
        let names = schema
            .iter()
            .map(|(n, _)| c_name(n))
            .collect::<Result<Vec<CString>>>()?;
        let descs: Vec<sys::tally_stat_desc> = names
            .iter()
            .zip(schema)
            .map(|(n, (_, k))| sys::tally_stat_desc {
                name: n.as_ptr(),
                kind: match k {
                    StatKind::State => sys::TALLY_STAT_STATE,
                    StatKind::Event => sys::TALLY_STAT_EVENT,
                },
            })
            .collect();
        let nr = u32::try_from(descs.len()).map_err(|_| Error::InvalidArgument)?;
        let mut t = ptr::null_mut();
        // SAFETY: descs and the names it points to live across the call
        // (the schema is copied); NULL options are the defaults.
        check(unsafe { sys::tally_stats_tree_create(&mut t, descs.as_ptr(), nr, ptr::null()) })?;
        Ok(StatsTree {
            inner: Arc::new(StatsInner {
                t: NonNull::new(t).ok_or(Error::OutOfMemory)?,
            }),
        })
    }

    /// The index of a stat of the schema.
    pub fn stat_index(&self, name: &str) -> Result<u32> {
        let name = c_name(name)?;
        // SAFETY: a live tree and a NUL-terminated name.
        check(unsafe { sys::tally_stats_stat_index(self.inner.t.as_ptr(), name.as_ptr()) })
            .map(|i| i as u32)
    }

    /// The root group (never destroyed: its handle's drop does nothing).
    pub fn root(&self) -> StatsGroup {
        StatsGroup {
            tree: self.inner.clone(),
            // SAFETY: a live tree's root is never NULL.
            g: NonNull::new(unsafe { sys::tally_stats_root(self.inner.t.as_ptr()) }).unwrap(),
            owned: false,
        }
    }
}

/// A group of a statistics tree: the only handle of its group (created
/// by [`StatsGroup::create`]), so that destroying it, which frees the C
/// group, consumes the one way to reach it.  Dropping it destroys the
/// group when it has no children (its stats stay in its ancestors'
/// hierarchical values); a group with children stays in the tree until
/// the tree goes.
pub struct StatsGroup {
    tree: Arc<StatsInner>,
    g: NonNull<sys::tally_stats_group>,
    /// Not the root, nor destroyed: the drop destroys it.
    owned: bool,
}

// SAFETY: updates, reads, flushes and child creation are MT-safe in C;
// destroy needs no other call on the group, which Drop's and destroy()'s
// ownership of the only handle guarantees.
unsafe impl Send for StatsGroup {}
// SAFETY: as above: &StatsGroup reaches only the MT-safe calls.
unsafe impl Sync for StatsGroup {}

impl StatsGroup {
    /// A child group (1 to 255 bytes, no '/').
    pub fn create(&self, name: &str) -> Result<StatsGroup> {
        let name = c_name(name)?;
        let mut g = ptr::null_mut();
        // SAFETY: a live group and a NUL-terminated name.
        check(unsafe { sys::tally_stats_group_create(self.g.as_ptr(), name.as_ptr(), &mut g) })?;
        Ok(StatsGroup {
            tree: self.tree.clone(),
            g: NonNull::new(g).ok_or(Error::OutOfMemory)?,
            owned: true,
        })
    }

    /// Destroys the group; `Busy` when it has children (it then stays in
    /// the tree until the tree goes), `InvalidArgument` for the root.
    pub fn destroy(mut self) -> Result<()> {
        if !self.owned {
            return Err(Error::InvalidArgument);
        }
        self.owned = false;
        // SAFETY: the only handle, owned: no other call on the group.
        check(unsafe { sys::tally_stats_group_destroy(self.g.as_ptr()) }).map(|_| ())
    }

    /// Adds `delta` to stat `stat` on the current CPU (no lock, never
    /// waits).
    pub fn add(&self, stat: u32, delta: i64) -> Result<()> {
        // SAFETY: a live group.
        check(unsafe { sys::tally_stats_mod(self.g.as_ptr(), stat, delta) }).map(|_| ())
    }

    /// The hierarchical (group and descendants) and local values.
    pub fn read(&self, stat: u32, mode: FlushMode) -> Result<(i64, i64)> {
        let (mut hier, mut local) = (0, 0);
        // SAFETY: a live group and two outputs.
        check(unsafe {
            sys::tally_stats_read(self.g.as_ptr(), stat, mode.raw(), &mut hier, &mut local)
        })?;
        Ok((hier, local))
    }

    /// memory.stat-style text: "name value" lines of hierarchical values.
    pub fn render(&self, mode: FlushMode) -> Result<String> {
        // SAFETY: a live group and a buffer of len bytes.
        c_text(|buf, len| {
            unsafe { sys::tally_stats_render(self.g.as_ptr(), mode.raw(), buf, len) }.into()
        })
    }

    /// The path from the root ("" for the root).
    pub fn path(&self) -> Result<String> {
        // SAFETY: a live group and a buffer of len bytes.
        c_text(|buf, len| unsafe { sys::tally_stats_group_path(self.g.as_ptr(), buf, len) }.into())
    }
}

impl Drop for StatsGroup {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: the only handle, dropped: no other call on the
            // group.  Busy (children left) keeps it in the tree.
            unsafe { sys::tally_stats_group_destroy(self.g.as_ptr()) };
        }
    }
}
