//! A hierarchical per-CPU counter (`tally/counter.h`).

use crate::error::{check, Result};
use std::cell::UnsafeCell;
use tally_sys as sys;

/// A per-CPU counter: an add touches the current CPU's slot only (one
/// restartable sequence); sums read the tree above the slots.
///
/// The C structure is registered by address (for fork()), so it lives in
/// a `Box` that never moves.
pub struct Counter {
    c: Box<UnsafeCell<sys::tally_counter>>,
}

// SAFETY: every operation but init and destroy is MT-safe in C
// (tally/counter.h: add is one restartable sequence, the sums relaxed
// loads, set a relaxed store); init happens in new() before the value is
// shared, destroy in drop() once no reference is left.  The counter holds
// no thread-affine state, so it may move to another thread.
unsafe impl Send for Counter {}
// SAFETY: as above: concurrent calls through &Counter are the C library's
// MT-safe calls.
unsafe impl Sync for Counter {}

impl Counter {
    /// A counter at 0 on the machine's CPUs.  `batch`, a power of two of
    /// at least 2, is how far a CPU's slot may move before it carries into
    /// the tree (the kernel uses 32).
    pub fn new(batch: u64) -> Result<Counter> {
        // SAFETY: all-zero is a valid (uninitialised) tally_counter:
        // pointers NULL, integers 0, as the C library's own zeroing on
        // failure leaves it.
        let c = Box::new(UnsafeCell::new(unsafe {
            std::mem::zeroed::<sys::tally_counter>()
        }));
        let batch =
            std::os::raw::c_ulong::try_from(batch).map_err(|_| crate::Error::InvalidArgument)?;
        // SAFETY: c points to a boxed counter that will not move; a NULL
        // domain is the system domain.
        check(unsafe { sys::tally_counter_init(c.get(), std::ptr::null_mut(), batch) })?;
        Ok(Counter { c })
    }

    /// Adds `inc` (any sign) on the current CPU.
    pub fn add(&self, inc: i64) {
        // SAFETY: an initialised counter; add is MT-safe.
        unsafe { sys::tally_counter_add_extern(self.c.get(), inc) }
    }

    /// The approximate sum: at most [`Counter::accuracy`]`.0` below the
    /// precise one at quiescence, never above.
    pub fn approximate(&self) -> i64 {
        // SAFETY: an initialised counter; relaxed loads.
        unsafe { sys::tally_counter_approximate_sum(self.c.get()) }
    }

    /// The precise sum: every CPU's slot.
    pub fn precise(&self) -> i64 {
        // SAFETY: an initialised counter; relaxed loads.
        unsafe { sys::tally_counter_precise_sum(self.c.get()) }
    }

    /// How far below and above the precise sum the approximate one may be
    /// at quiescence: `(under, over)`.
    pub fn accuracy(&self) -> (u64, u64) {
        let (mut under, mut over) = (0, 0);
        // SAFETY: an initialised counter and two outputs.
        unsafe {
            sys::tally_counter_approximate_accuracy_range(self.c.get(), &mut under, &mut over)
        };
        (under, over)
    }

    /// Makes the counter read `v` (call it while no add runs: a
    /// concurrent add may be absorbed).
    pub fn set(&self, v: i64) {
        // SAFETY: an initialised counter; set is MT-safe.
        unsafe { sys::tally_counter_set(self.c.get(), v) }
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        // SAFETY: &mut self: no other call runs; destroyed once.
        unsafe { sys::tally_counter_destroy(self.c.get()) }
    }
}
