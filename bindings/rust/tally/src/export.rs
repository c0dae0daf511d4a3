//! The Prometheus and OpenMetrics text of trees (`tally/export.h`).

use crate::error::{check, Error, Result};
use crate::memory::{MemInner, MemoryTree};
use crate::stats::{FlushMode, StatsInner, StatsTree};
use crate::{c_name, c_text};
use std::ffi::CString;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use tally_sys as sys;

/// The text format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Prometheus text format 0.0.4.
    Prometheus,
    /// OpenMetrics 1.0 (ends with "# EOF").
    OpenMetrics,
}

/// An exporter: a list of trees, written as text on demand.  It holds
/// each tree it exports, so they outlive it.
pub struct Exporter {
    e: NonNull<sys::tally_exporter>,
    _memory: Vec<Arc<MemInner>>,
    _stats: Vec<Arc<StatsInner>>,
}

// SAFETY: an exporter is used by one thread at a time (tally/export.h);
// every call that uses it takes &mut self, so a shared &Exporter reaches
// none, and it holds nothing tied to a thread.
unsafe impl Send for Exporter {}
// SAFETY: as above: no &self method calls C.
unsafe impl Sync for Exporter {}

impl Exporter {
    /// An exporter without sources, with constant labels on every sample
    /// (names `[a-zA-Z_][a-zA-Z0-9_]*`, not `group`, `instance`, `job`).
    pub fn new(labels: &[(&str, &str)]) -> Result<Exporter> {
        let names = labels
            .iter()
            .map(|(n, _)| c_name(n))
            .collect::<Result<Vec<CString>>>()?;
        let values = labels
            .iter()
            .map(|(_, v)| c_name(v))
            .collect::<Result<Vec<CString>>>()?;
        let raw: Vec<sys::tally_export_label> = names
            .iter()
            .zip(&values)
            .map(|(n, v)| sys::tally_export_label {
                name: n.as_ptr(),
                value: v.as_ptr(),
            })
            .collect();
        let opts = sys::tally_export_options {
            format: sys::TALLY_EXPORT_PROMETHEUS,
            labels: raw.as_ptr(),
            nr_labels: u32::try_from(raw.len()).map_err(|_| Error::InvalidArgument)?,
            pid: false,
        };
        let mut e = ptr::null_mut();
        // SAFETY: the labels live across the call (copied).
        check(unsafe { sys::tally_exporter_create(&mut e, &opts) })?;
        Ok(Exporter {
            e: NonNull::new(e).ok_or(Error::OutOfMemory)?,
            _memory: Vec::new(),
            _stats: Vec::new(),
        })
    }

    /// Exports a memory tree's usage, peak, limits and events under
    /// `prefix` (families `PREFIX_memory_current_bytes`, ...), and its
    /// memory.stat (`PREFIX_memstat_*`) when `with_stat`.
    pub fn add_memory(&mut self, tree: &MemoryTree, prefix: &str, with_stat: bool) -> Result<()> {
        let p = c_name(prefix)?;
        let opts = sys::tally_export_memcg_options { prefix: p.as_ptr() };
        // SAFETY: an exporter used by this thread alone (&mut self); the
        // tree is kept alive by the Arc pushed below.
        check(unsafe {
            sys::tally_exporter_add_memcg(self.e.as_ptr(), tree.inner.t.as_ptr(), &opts)
        })?;
        self._memory.push(tree.inner.clone());
        if with_stat {
            let sp = c_name(&format!("{prefix}_memstat"))?;
            let sopts = sys::tally_export_stats_options {
                prefix: sp.as_ptr(),
                units: ptr::null(),
                mode: sys::TALLY_FLUSH_FORCE,
            };
            // SAFETY: the memory tree's statistics tree lives as long as
            // the memory tree, which this exporter holds.
            check(unsafe {
                sys::tally_exporter_add_stats(
                    self.e.as_ptr(),
                    sys::tally_memcg_stats_tree(tree.inner.t.as_ptr()),
                    &sopts,
                )
            })?;
        }
        Ok(())
    }

    /// Exports a statistics tree under `prefix`, read after a flush of
    /// the given mode (`Force` or `IfNeeded`).
    pub fn add_stats(&mut self, tree: &StatsTree, prefix: &str, mode: FlushMode) -> Result<()> {
        let p = c_name(prefix)?;
        let opts = sys::tally_export_stats_options {
            prefix: p.as_ptr(),
            units: ptr::null(),
            mode: mode.raw(),
        };
        // SAFETY: as add_memory().
        check(unsafe {
            sys::tally_exporter_add_stats(self.e.as_ptr(), tree.inner.t.as_ptr(), &opts)
        })?;
        self._stats.push(tree.inner.clone());
        Ok(())
    }

    /// A snapshot of every source in `format`.
    pub fn render(&mut self, format: ExportFormat) -> Result<String> {
        let format = match format {
            ExportFormat::Prometheus => sys::TALLY_EXPORT_PROMETHEUS,
            ExportFormat::OpenMetrics => sys::TALLY_EXPORT_OPENMETRICS,
        };
        let e = self.e.as_ptr();
        // SAFETY: an exporter used by this thread alone (&mut self), a
        // buffer of len bytes.
        c_text(|buf, len| unsafe { sys::tally_export_buffer_as(e, format, buf, len) })
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        // SAFETY: no other call on the exporter runs (&mut self); its
        // trees are still held.
        unsafe { sys::tally_exporter_destroy(self.e.as_ptr()) }
    }
}
