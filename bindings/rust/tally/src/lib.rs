//! Safe Rust API of libtally: per-CPU counters, statistics trees, and
//! memory groups with hierarchical limits, exported to Prometheus.
//!
//! - [`Counter`]: a hierarchical per-CPU counter (`tally/counter.h`).
//! - [`StatsTree`] and [`StatsGroup`]: a tree of groups with per-CPU
//!   statistics flushed lazily (`tally/stats.h`).
//! - [`MemoryTree`] and [`MemoryGroup`]: memory groups with min, low,
//!   high and max, charged and uncharged in bytes (`tally/memcg.h`).
//! - [`Exporter`]: the Prometheus and OpenMetrics text of trees.
//!
//! Lifetimes the C library leaves to its caller are types here: a group
//! handle holds its tree (an `Arc`), so a tree is destroyed only after
//! its last handle; a memory group's handle is a reference of the C
//! library (`Clone` takes one, `Drop` puts it); a statistics group is
//! destroyed by consuming its only handle.  Every C error is an
//! [`Error`].

mod counter;
mod error;
mod export;
mod memory;
mod stats;

pub use counter::Counter;
pub use error::{Error, Result};
pub use export::{ExportFormat, Exporter};
pub use memory::{
    ChargeFlags, Charged, Limits, MemoryEvents, MemoryFile, MemoryGroup, MemoryStat, MemoryTree,
    MemoryTreeInfo, ReadMode, Usage,
};
pub use stats::{FlushMode, StatKind, StatsGroup, StatsTree};

/// The largest charge or uncharge, `TALLY_MEMCG_BYTES_MAX`.
pub const BYTES_MAX: usize = tally_sys::TALLY_MEMCG_BYTES_MAX as usize;
/// A limit that does not limit, `TALLY_MEMCG_UNLIMITED`.
pub const UNLIMITED: usize = tally_sys::TALLY_MEMCG_UNLIMITED as usize;

/// The version of the C library linked.
pub fn version() -> &'static str {
    // SAFETY: tally_version() returns a static NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(tally_sys::tally_version()) }
        .to_str()
        .unwrap_or("")
}

/// A name for C: refused (`InvalidArgument`) when it holds a NUL byte,
/// which C would take for its end.
pub(crate) fn c_name(name: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(name).map_err(|_| Error::InvalidArgument)
}

/// Bytes for C's `long`: refused (`InvalidArgument`) above `LONG_MAX`.
pub(crate) fn c_bytes(bytes: usize) -> Result<std::os::raw::c_long> {
    std::os::raw::c_long::try_from(bytes).map_err(|_| Error::InvalidArgument)
}

/// Text that a C function writes into a buffer, retried with a larger one
/// while it says -ENOSPC (or, `snprintf()`-like, a longer length).
pub(crate) fn c_text(mut f: impl FnMut(*mut std::os::raw::c_char, usize) -> i64) -> Result<String> {
    let mut len = 4096usize;
    loop {
        let mut buf = vec![0u8; len];
        let rc = f(buf.as_mut_ptr().cast(), len);
        if rc == -28 {
            // ENOSPC: a short buffer.
            len *= 4;
            continue;
        }
        if rc < 0 {
            return Err(Error::from_errno(rc, false));
        }
        let n = rc as usize;
        if n >= len {
            len = n + 1 + n / 4;
            continue;
        }
        buf.truncate(n);
        // The library writes valid UTF-8 (names' other bytes are escaped
        // by the exporter); a group name given as bytes by C code could
        // still hold others, shown as U+FFFD.
        return Ok(String::from_utf8(buf)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()));
    }
}
