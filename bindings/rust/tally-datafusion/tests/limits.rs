//! The limits a TallyMemoryPool keeps at its edges: `grow()` past a max,
//! a max above the pool's (the root's), a request larger than any charge.

use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};
use std::sync::Arc;
use tally::{MemoryTree, ReadMode};
use tally_datafusion::TallyMemoryPool;

const MIB: usize = 1 << 20;

fn reservation(pool: &TallyMemoryPool, name: &str) -> MemoryReservation {
    let p: Arc<dyn MemoryPool> = Arc::new(pool.clone());
    MemoryConsumer::new(name).register(&p)
}

fn refusal_text(e: DataFusionError) -> String {
    match e {
        DataFusionError::ResourcesExhausted(m) => m,
        other => panic!("not ResourcesExhausted: {other}"),
    }
}

#[test]
fn a_grow_past_a_query_max_refuses_every_later_try_grow_until_it_is_given_back() {
    let pool = TallyMemoryPool::new(64 * MIB).unwrap();
    let q = pool.for_query("q", MIB).unwrap();
    let a = reservation(&q, "a");
    let b = reservation(&q, "b");

    // One byte more than the query's max: tally refuses a charge that
    // large even with NOFAIL; the pool charges it in pieces.
    a.grow(MIB + 1);
    assert_eq!(q.reserved(), MIB + 1);
    assert_eq!(pool.reserved(), MIB + 1);
    assert!(b.try_grow(512 << 10).is_err());
    assert!(b.try_grow(1).is_err());
    assert_eq!(q.group().usage(ReadMode::Precise).value, MIB + 1);

    a.shrink(MIB + 1);
    assert_eq!(q.reserved(), 0);
    assert!(b.try_grow(512 << 10).is_ok());
    assert_eq!(q.reserved(), 512 << 10);
    b.free();
    a.free();
    assert_eq!(pool.pool_group().usage(ReadMode::Drain).value, 0);
}

#[test]
fn a_grow_past_the_pool_max_keeps_reserved_exact_and_the_pool_full() {
    let pool = TallyMemoryPool::new(10 * MIB).unwrap();
    let a = reservation(&pool, "a");
    let b = reservation(&pool, "b");

    a.grow(20 * MIB);
    assert_eq!(pool.reserved(), 20 * MIB);
    assert!(b.try_grow(5 * MIB).is_err());
    a.shrink(15 * MIB);
    assert_eq!(pool.reserved(), 5 * MIB);
    assert!(b.try_grow(5 * MIB).is_ok());
    assert!(b.try_grow(1).is_err());
    a.free();
    b.free();
    assert_eq!(pool.pool_group().usage(ReadMode::Drain).value, 0);
}

#[test]
fn a_refusal_by_the_roots_max_names_the_root_and_memory_limit_is_the_roots() {
    let tree = MemoryTree::new().unwrap();
    tree.root().set_max(MIB).unwrap();
    let pool = TallyMemoryPool::in_tree(&tree, "df", tally::UNLIMITED).unwrap();
    let r = reservation(&pool, "probe");

    assert!(matches!(pool.memory_limit(), MemoryLimit::Finite(m) if m == MIB));
    let text = refusal_text(r.try_grow(2 * MIB).unwrap_err());
    assert!(
        text.contains("group / is at 0 B of its limit 1.0 MiB"),
        "{text}"
    );
    assert!(r.try_grow(MIB).is_ok());
    r.free();
}

#[test]
fn a_request_larger_than_any_charge_is_refused_as_such() {
    let pool = TallyMemoryPool::new(tally::UNLIMITED).unwrap();
    let r = reservation(&pool, "huge");

    let text = refusal_text(r.try_grow(tally::BYTES_MAX + 1).unwrap_err());
    assert!(text.contains("larger than any charge"), "{text}");
    assert_eq!(pool.reserved(), 0);
}
