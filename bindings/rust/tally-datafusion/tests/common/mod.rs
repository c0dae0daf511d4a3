//! The workload of the tests and the benchmark: a sort and a grouped
//! aggregate of generated rows, run by DataFusion with a given memory
//! pool, reduced to a digest of the result and the number of spills.
#![allow(dead_code)]

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::error::Result;
use datafusion::execution::memory_pool::MemoryPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::{execute_stream, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
use std::sync::Arc;

/// Rows of the tests' queries.
pub const ROWS: u64 = 10_000_000;

/// A sort of every row by a key that shuffles them (a bijection of
/// 0..ROWS, so the order is total).
pub fn sort_sql(rows: u64) -> String {
    format!("SELECT value FROM range({rows}) ORDER BY (value * 2654435761) % 10000019")
}

/// A grouped aggregate of 2,000,003 groups.
pub fn aggregate_sql(rows: u64) -> String {
    format!(
        "SELECT value % 2000003 AS k, count(*) AS c, sum(value) AS s \
         FROM range({rows}) GROUP BY value % 2000003"
    )
}

/// What a query returned: rows, an order-sensitive digest (sort) or an
/// order-insensitive one (aggregate), and the spills of its plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub rows: u64,
    pub digest: u64,
    pub spills: usize,
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}

fn spills(plan: &Arc<dyn ExecutionPlan>) -> usize {
    plan.metrics().and_then(|m| m.spill_count()).unwrap_or(0)
        + plan.children().into_iter().map(spills).sum::<usize>()
}

/// A session whose runtime uses `pool`, `partitions` partitions.
pub fn session(pool: Arc<dyn MemoryPool>, partitions: usize) -> Result<SessionContext> {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(pool)
        .build_arc()?;
    let config = SessionConfig::new()
        .with_target_partitions(partitions)
        .with_batch_size(8192);
    Ok(SessionContext::new_with_config_rt(config, runtime))
}

/// Runs `sql` on a two-partition session of `pool`; `ordered` digests
/// the rows in order (and checks the first column is what the sort key
/// orders).
pub async fn run(pool: Arc<dyn MemoryPool>, sql: &str, ordered: bool) -> Result<Outcome> {
    run_partitions(pool, sql, ordered, 2).await
}

/// [`run`] on `partitions` partitions.
pub async fn run_partitions(
    pool: Arc<dyn MemoryPool>,
    sql: &str,
    ordered: bool,
    partitions: usize,
) -> Result<Outcome> {
    let ctx = session(pool, partitions)?;
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    let mut stream = execute_stream(plan.clone(), ctx.task_ctx())?;
    let (mut rows, mut digest, mut last_key) = (0u64, 0u64, None::<i64>);
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let cols: Vec<_> = batch
            .columns()
            .iter()
            .map(|c| c.as_primitive::<Int64Type>().clone())
            .collect();
        for i in 0..batch.num_rows() {
            if ordered {
                let v = cols[0].value(i);
                let key = (v.wrapping_mul(2654435761)) % 10000019;
                assert!(last_key.is_none_or(|k| k < key), "rows out of order");
                last_key = Some(key);
                digest = mix(digest ^ v as u64);
            } else {
                let mut h = 0u64;
                for c in &cols {
                    assert!(!c.is_null(i));
                    h = mix(h ^ c.value(i) as u64);
                }
                digest = digest.wrapping_add(h);
            }
            rows += 1;
        }
    }
    drop(stream);
    Ok(Outcome {
        rows,
        digest,
        spills: spills(&plan),
    })
}
