//! Raw FFI declarations of libtally (`include/tally/`), for the safe
//! `tally` crate.
//!
//! Every declaration here is checked against the C headers by this
//! crate's test (`tests/declarations.rs`): each function is redeclared in
//! C with the types written here, which the C compiler refuses when they
//! differ from the header's prototype, and each structure's size, field
//! offsets and field types are compared with the C compiler's.
//!
//! The headers' `static inline` fast paths (`tally_memcg_charge()`,
//! `tally_memcg_uncharge()`, `tally_counter_add()`) are reached through
//! their out-of-line twins (`tally_memcg_charge_extern()`, ...): the same
//! code compiled into the library, at the cost of one call.
#![no_std]
#![allow(non_camel_case_types)]

pub use core::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};

/// Opaque: a CPU domain (`tally/domain.h`).
#[repr(C)]
pub struct tally_domain {
    _private: [u8; 0],
}
/// Opaque: a memory tree (`tally/memcg.h`).
#[repr(C)]
pub struct tally_memcg_tree {
    _private: [u8; 0],
}
/// Opaque: a memory group (`tally/memcg.h`).
#[repr(C)]
pub struct tally_memcg {
    _private: [u8; 0],
}
/// Opaque: a statistics tree (`tally/stats.h`).
#[repr(C)]
pub struct tally_stats_tree {
    _private: [u8; 0],
}
/// Opaque: a statistics group (`tally/stats.h`).
#[repr(C)]
pub struct tally_stats_group {
    _private: [u8; 0],
}
/// Opaque: an exporter (`tally/export.h`).
#[repr(C)]
pub struct tally_exporter {
    _private: [u8; 0],
}
/// Opaque: one cache-line item of a counter's tree (`tally/counter.h`).
#[repr(C)]
pub struct tally_counter_item {
    _private: [u8; 0],
}

/// `struct tally_counter` (`tally/counter.h`): its fields are private to
/// the C library; it is registered by address, so it must not move once
/// initialised.
#[repr(C)]
pub struct tally_counter {
    pub level0: *mut c_long,
    pub batch: c_ulong,
    pub items: *mut tally_counter_item,
    pub domain: *mut tally_domain,
    pub bias: c_long,
    pub under: c_ulong,
    pub flags: c_uint,
    pub nr_top: c_uint,
    pub prev: *mut tally_counter,
    pub next: *mut tally_counter,
}

/// `struct tally_memcg_options`.
#[repr(C)]
pub struct tally_memcg_options {
    pub domain: *mut tally_domain,
    pub batch: c_long,
    pub max_batch: c_long,
}

/// `struct tally_memcg_limits`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct tally_memcg_limits {
    pub min: c_long,
    pub low: c_long,
    pub high: c_long,
    pub max: c_long,
}

/// `struct tally_memcg_range`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct tally_memcg_range {
    pub value: c_long,
    pub min: c_long,
    pub max: c_long,
}

/// `struct tally_memcg_info`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct tally_memcg_info {
    pub refills: c_ulong,
    pub drains: c_ulong,
    pub drain_waits: c_ulong,
    pub refusals: c_ulong,
    pub groups: c_ulong,
    pub zombies: c_ulong,
    pub underflows: c_ulong,
    pub rseq: c_int,
    pub stock_bytes: c_ulong,
    pub group_bytes: c_ulong,
}

/// `struct tally_stat_desc`.
#[repr(C)]
pub struct tally_stat_desc {
    pub name: *const c_char,
    pub kind: tally_stat_kind,
}

/// `struct tally_stats_options`.
#[repr(C)]
pub struct tally_stats_options {
    pub domain: *mut tally_domain,
    pub batch: c_ulong,
    pub period_ns: u64,
    pub clock: Option<unsafe extern "C" fn(arg: *mut c_void) -> u64>,
    pub clock_arg: *mut c_void,
}

/// `struct tally_stats_info`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct tally_stats_info {
    pub flushes: u64,
    pub root_flushes: u64,
    pub groups_flushed: u64,
    pub shared_waits: u64,
    pub groups: u64,
    pub fenced: u64,
    pub barriers: u64,
    pub takeovers: u64,
    pub naps: u64,
    pub flush_lock_waits: u64,
    pub flush_lock_wait_ns: u64,
    pub flush_lock_long_holds: u64,
    pub flush_lock_long_hold_ns: u64,
    pub adoptions: u64,
}

/// `struct tally_export_label`.
#[repr(C)]
pub struct tally_export_label {
    pub name: *const c_char,
    pub value: *const c_char,
}

/// `struct tally_export_options`.
#[repr(C)]
pub struct tally_export_options {
    pub format: tally_export_format,
    pub labels: *const tally_export_label,
    pub nr_labels: c_uint,
    pub pid: bool,
}

/// `struct tally_export_stats_options`.
#[repr(C)]
pub struct tally_export_stats_options {
    pub prefix: *const c_char,
    pub units: *const *const c_char,
    pub mode: tally_flush_mode,
}

/// `struct tally_export_memcg_options`.
#[repr(C)]
pub struct tally_export_memcg_options {
    pub prefix: *const c_char,
}

/// `enum tally_stat_kind`.
pub type tally_stat_kind = c_uint;
pub const TALLY_STAT_STATE: tally_stat_kind = 0;
pub const TALLY_STAT_EVENT: tally_stat_kind = 1;

/// `enum tally_flush_mode`.
pub type tally_flush_mode = c_uint;
pub const TALLY_FLUSH_IF_NEEDED: tally_flush_mode = 0;
pub const TALLY_FLUSH_FORCE: tally_flush_mode = 1;
pub const TALLY_FLUSH_RATELIMITED: tally_flush_mode = 2;
pub const TALLY_FLUSH_NONE: tally_flush_mode = 3;

/// `enum tally_memcg_stat`.
pub type tally_memcg_stat = c_uint;
pub const TALLY_MEMCG_ANON: tally_memcg_stat = 0;
pub const TALLY_MEMCG_FILE: tally_memcg_stat = 1;
pub const TALLY_MEMCG_KERNEL: tally_memcg_stat = 2;
pub const TALLY_MEMCG_KERNEL_STACK: tally_memcg_stat = 3;
pub const TALLY_MEMCG_PAGETABLES: tally_memcg_stat = 4;
pub const TALLY_MEMCG_SOCK: tally_memcg_stat = 5;
pub const TALLY_MEMCG_SHMEM: tally_memcg_stat = 6;
pub const TALLY_MEMCG_FILE_MAPPED: tally_memcg_stat = 7;
pub const TALLY_MEMCG_FILE_DIRTY: tally_memcg_stat = 8;
pub const TALLY_MEMCG_FILE_WRITEBACK: tally_memcg_stat = 9;
pub const TALLY_MEMCG_SLAB_RECLAIMABLE: tally_memcg_stat = 10;
pub const TALLY_MEMCG_SLAB_UNRECLAIMABLE: tally_memcg_stat = 11;
pub const TALLY_MEMCG_PGFAULT: tally_memcg_stat = 12;
pub const TALLY_MEMCG_PGMAJFAULT: tally_memcg_stat = 13;
pub const TALLY_MEMCG_NR_STATS: tally_memcg_stat = 14;

/// `enum tally_memcg_event`.
pub type tally_memcg_event = c_uint;
pub const TALLY_MEMCG_EVENT_LOW: tally_memcg_event = 0;
pub const TALLY_MEMCG_EVENT_HIGH: tally_memcg_event = 1;
pub const TALLY_MEMCG_EVENT_MAX: tally_memcg_event = 2;
pub const TALLY_MEMCG_EVENT_OOM: tally_memcg_event = 3;
pub const TALLY_MEMCG_EVENT_OOM_KILL: tally_memcg_event = 4;
pub const TALLY_MEMCG_NR_EVENTS: tally_memcg_event = 5;

/// `enum tally_memcg_limit`.
pub type tally_memcg_limit = c_uint;
pub const TALLY_MEMCG_MIN: tally_memcg_limit = 0;
pub const TALLY_MEMCG_LOW: tally_memcg_limit = 1;
pub const TALLY_MEMCG_HIGH: tally_memcg_limit = 2;
pub const TALLY_MEMCG_MAX: tally_memcg_limit = 3;

/// `enum tally_memcg_read_mode`.
pub type tally_memcg_read_mode = c_uint;
pub const TALLY_MEMCG_READ_APPROX: tally_memcg_read_mode = 0;
pub const TALLY_MEMCG_READ_PRECISE: tally_memcg_read_mode = 1;
pub const TALLY_MEMCG_READ_DRAIN: tally_memcg_read_mode = 2;

/// `enum tally_memcg_file`.
pub type tally_memcg_file = c_uint;
pub const TALLY_MEMCG_FILE_STAT: tally_memcg_file = 0;
pub const TALLY_MEMCG_FILE_EVENTS: tally_memcg_file = 1;
pub const TALLY_MEMCG_FILE_EVENTS_LOCAL: tally_memcg_file = 2;
pub const TALLY_MEMCG_FILE_LIMITS: tally_memcg_file = 3;
pub const TALLY_MEMCG_FILE_ALL: tally_memcg_file = 4;

/// `enum tally_export_format`.
pub type tally_export_format = c_uint;
pub const TALLY_EXPORT_PROMETHEUS: tally_export_format = 0;
pub const TALLY_EXPORT_OPENMETRICS: tally_export_format = 1;

/// `TALLY_MEMCG_UNLIMITED`: the max of a group without a limit.
pub const TALLY_MEMCG_UNLIMITED: c_long = c_long::MAX;
/// `TALLY_MEMCG_BYTES_MAX`: the largest charge or uncharge.
pub const TALLY_MEMCG_BYTES_MAX: c_long = c_long::MAX / 4;
/// `TALLY_MEMCG_NAME_MAX`: the longest group name.
pub const TALLY_MEMCG_NAME_MAX: c_uint = 255;
/// `TALLY_MEMCG_MAX_DEPTH`: the deepest group (the root is at 0).
pub const TALLY_MEMCG_MAX_DEPTH: c_uint = 63;
/// `TALLY_STATS_MAX`: the most stats of a schema.
pub const TALLY_STATS_MAX: c_uint = 256;
/// `TALLY_MEMCG_NOFAIL`: the charge always succeeds, over max too.
pub const TALLY_MEMCG_NOFAIL: c_uint = 0x1;
/// `TALLY_MEMCG_NORECLAIM`: no reclaim callback, no OOM policy.
pub const TALLY_MEMCG_NORECLAIM: c_uint = 0x2;
/// `TALLY_MEMCG_NOBLOCK`: never take a lock, sleep or call a callback.
pub const TALLY_MEMCG_NOBLOCK: c_uint = 0x4;
/// `TALLY_MEMCG_OVER_HIGH`: charged, and some level is above its high.
pub const TALLY_MEMCG_OVER_HIGH: c_int = 1;

extern "C" {
    // tally/counter.h
    pub fn tally_counter_init(c: *mut tally_counter, d: *mut tally_domain, batch: c_ulong)
        -> c_int;
    pub fn tally_counter_destroy(c: *mut tally_counter);
    pub fn tally_counter_add_extern(c: *mut tally_counter, inc: c_long);
    pub fn tally_counter_approximate_sum(c: *const tally_counter) -> c_long;
    pub fn tally_counter_precise_sum(c: *const tally_counter) -> c_long;
    pub fn tally_counter_approximate_accuracy_range(
        c: *const tally_counter,
        under: *mut c_ulong,
        over: *mut c_ulong,
    );
    pub fn tally_counter_set(c: *mut tally_counter, v: c_long);

    // tally/stats.h
    pub fn tally_stats_tree_create(
        out: *mut *mut tally_stats_tree,
        schema: *const tally_stat_desc,
        nr_stats: c_uint,
        opts: *const tally_stats_options,
    ) -> c_int;
    pub fn tally_stats_tree_destroy(t: *mut tally_stats_tree);
    pub fn tally_stats_root(t: *mut tally_stats_tree) -> *mut tally_stats_group;
    pub fn tally_stats_nr_stats(t: *const tally_stats_tree) -> c_uint;
    pub fn tally_stats_stat_index(t: *const tally_stats_tree, name: *const c_char) -> c_int;
    pub fn tally_stats_group_create(
        parent: *mut tally_stats_group,
        name: *const c_char,
        out: *mut *mut tally_stats_group,
    ) -> c_int;
    pub fn tally_stats_group_destroy(g: *mut tally_stats_group) -> c_int;
    pub fn tally_stats_group_path(
        g: *const tally_stats_group,
        buf: *mut c_char,
        len: usize,
    ) -> c_int;
    pub fn tally_stats_mod(g: *mut tally_stats_group, stat: c_uint, delta: c_long) -> c_int;
    pub fn tally_stats_read(
        g: *mut tally_stats_group,
        stat: c_uint,
        mode: tally_flush_mode,
        hier: *mut c_long,
        local: *mut c_long,
    ) -> c_int;
    pub fn tally_stats_render(
        g: *mut tally_stats_group,
        mode: tally_flush_mode,
        buf: *mut c_char,
        len: usize,
    ) -> c_int;
    pub fn tally_stats_flush(g: *mut tally_stats_group) -> c_int;
    pub fn tally_stats_tree_info(t: *const tally_stats_tree, info: *mut tally_stats_info) -> c_int;

    // tally/memcg.h
    pub fn tally_memcg_tree_create(
        out: *mut *mut tally_memcg_tree,
        opts: *const tally_memcg_options,
    ) -> c_int;
    pub fn tally_memcg_tree_destroy(t: *mut tally_memcg_tree);
    pub fn tally_memcg_root(t: *mut tally_memcg_tree) -> *mut tally_memcg;
    pub fn tally_memcg_create(
        parent: *mut tally_memcg,
        name: *const c_char,
        out: *mut *mut tally_memcg,
    ) -> c_int;
    pub fn tally_memcg_find(
        t: *mut tally_memcg_tree,
        path: *const c_char,
        out: *mut *mut tally_memcg,
    ) -> c_int;
    pub fn tally_memcg_destroy(g: *mut tally_memcg) -> c_int;
    pub fn tally_memcg_get(g: *mut tally_memcg);
    pub fn tally_memcg_put(g: *mut tally_memcg);
    pub fn tally_memcg_path(g: *const tally_memcg, buf: *mut c_char, len: usize) -> c_int;
    pub fn tally_memcg_set_limit(
        g: *mut tally_memcg,
        which: tally_memcg_limit,
        bytes: c_long,
    ) -> c_int;
    pub fn tally_memcg_get_limits(g: *const tally_memcg, out: *mut tally_memcg_limits) -> c_int;
    pub fn tally_memcg_charge_extern(g: *mut tally_memcg, bytes: c_long, flags: c_uint) -> c_int;
    pub fn tally_memcg_uncharge_extern(g: *mut tally_memcg, bytes: c_long) -> c_int;
    pub fn tally_memcg_usage(
        g: *mut tally_memcg,
        mode: tally_memcg_read_mode,
        out: *mut tally_memcg_range,
    ) -> c_int;
    pub fn tally_memcg_peak(g: *mut tally_memcg, reset: bool) -> c_long;
    pub fn tally_memcg_drain(g: *mut tally_memcg) -> c_int;
    pub fn tally_memcg_stat_mod(
        g: *mut tally_memcg,
        item: tally_memcg_stat,
        delta: c_long,
    ) -> c_int;
    pub fn tally_memcg_stat_read(
        g: *mut tally_memcg,
        item: tally_memcg_stat,
        mode: tally_flush_mode,
        hier: *mut c_long,
        local: *mut c_long,
    ) -> c_int;
    pub fn tally_memcg_stat_name(item: tally_memcg_stat) -> *const c_char;
    pub fn tally_memcg_stats_tree(t: *mut tally_memcg_tree) -> *mut tally_stats_tree;
    pub fn tally_memcg_events(
        g: *const tally_memcg,
        hier: *mut c_long,
        local: *mut c_long,
    ) -> c_int;
    pub fn tally_memcg_event_name(ev: tally_memcg_event) -> *const c_char;
    pub fn tally_memcg_events_fd(g: *mut tally_memcg) -> c_int;
    pub fn tally_memcg_render(
        g: *mut tally_memcg,
        file: tally_memcg_file,
        json: bool,
        buf: *mut c_char,
        len: usize,
    ) -> c_int;
    pub fn tally_memcg_tree_info(t: *const tally_memcg_tree, out: *mut tally_memcg_info) -> c_int;

    // tally/memcg_current.h
    pub fn tally_memcg_current() -> *mut tally_memcg;
    pub fn tally_memcg_set_current(g: *mut tally_memcg) -> *mut tally_memcg;

    // tally/export.h
    pub fn tally_exporter_create(
        out: *mut *mut tally_exporter,
        opts: *const tally_export_options,
    ) -> c_int;
    pub fn tally_exporter_destroy(e: *mut tally_exporter);
    pub fn tally_exporter_add_stats(
        e: *mut tally_exporter,
        t: *mut tally_stats_tree,
        opts: *const tally_export_stats_options,
    ) -> c_int;
    pub fn tally_exporter_add_memcg(
        e: *mut tally_exporter,
        t: *mut tally_memcg_tree,
        opts: *const tally_export_memcg_options,
    ) -> c_int;
    pub fn tally_export_buffer_as(
        e: *mut tally_exporter,
        format: tally_export_format,
        buf: *mut c_char,
        len: usize,
    ) -> c_long;

    // tally/version.h
    pub fn tally_version() -> *const c_char;
}
