//! The memory pools of DataFusion against TallyMemoryPool.
//!
//! 1. try_grow + shrink of 4 KiB, per thread, at 1, 2 and 4 threads, each
//!    thread on its own consumer of one pool (limit 1 GiB: nothing is
//!    refused): ns per pair, median of the rounds, pools alternating in
//!    every round.
//! 2. The tests' sort and grouped aggregate of 10 million rows with each
//!    pool (limit 4 GiB: no spill), median of the rounds, alternating.
//! 3. The FFI: a MemoryGroup's charge + uncharge of 4 KiB from Rust (two
//!    calls of the library's out-of-line twins).
//!
//! `cargo bench -p tally-datafusion -- [ROUNDS]` (default 5).

#[path = "../tests/common/mod.rs"]
mod common;

use datafusion::execution::memory_pool::{
    FairSpillPool, GreedyMemoryPool, MemoryConsumer, MemoryPool, TrackConsumersPool,
};
use std::num::NonZeroUsize;
use std::sync::{Arc, Barrier};
use std::time::Instant;
use tally::{ChargeFlags, MemoryTree};
use tally_datafusion::TallyMemoryPool;

const LIMIT: usize = 1 << 30;
const PAIRS: usize = 2_000_000;

fn pools(limit: usize) -> Vec<(&'static str, Arc<dyn MemoryPool>)> {
    vec![
        (
            "TallyMemoryPool",
            Arc::new(TallyMemoryPool::new(limit).unwrap()),
        ),
        ("GreedyMemoryPool", Arc::new(GreedyMemoryPool::new(limit))),
        ("FairSpillPool", Arc::new(FairSpillPool::new(limit))),
        (
            "TrackConsumersPool<Greedy>",
            Arc::new(TrackConsumersPool::new(
                GreedyMemoryPool::new(limit),
                NonZeroUsize::new(5).unwrap(),
            )),
        ),
    ]
}

/// ns per try_grow + shrink pair, per thread, `threads` at once.
fn pairs(pool: &Arc<dyn MemoryPool>, threads: usize) -> f64 {
    let start = Barrier::new(threads + 1);
    let done = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (start, done) = (&start, &done);
            s.spawn(move || {
                let r = MemoryConsumer::new(format!("bench{t}")).register(pool);
                start.wait();
                for _ in 0..PAIRS {
                    r.try_grow(4096).unwrap();
                    r.shrink(4096);
                }
                done.wait();
            });
        }
        start.wait();
        let t0 = Instant::now();
        done.wait();
        t0.elapsed().as_nanos() as f64 / PAIRS as f64
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(5);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "machine: {cpu}, {} CPUs; load before: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.trim()
    );
    println!("rounds: {rounds} (median), pools alternating in each round\n");

    println!("## try_grow + shrink of 4 KiB, ns per pair per thread\n");
    println!("| pool | 1 thread | 2 threads | 4 threads |");
    println!("|---|---|---|---|");
    let names: Vec<&str> = pools(LIMIT).iter().map(|p| p.0).collect();
    let mut results = vec![[Vec::new(), Vec::new(), Vec::new()]; names.len()];
    for _ in 0..rounds {
        for (ti, threads) in [1, 2, 4].into_iter().enumerate() {
            for (pi, (_, pool)) in pools(LIMIT).iter().enumerate() {
                results[pi][ti].push(pairs(pool, threads));
            }
        }
    }
    let mut med = vec![[0f64; 3]; names.len()];
    for (pi, name) in names.iter().enumerate() {
        for ti in 0..3 {
            med[pi][ti] = median(&mut results[pi][ti]);
        }
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} |",
            med[pi][0], med[pi][1], med[pi][2]
        );
    }
    println!(
        "\nGreedyMemoryPool / TallyMemoryPool at 2 threads: {:.1}x\n",
        med[1][1] / med[0][1]
    );

    println!("## FFI: MemoryGroup charge + uncharge of 4 KiB, 1 thread\n");
    let tree = MemoryTree::new().unwrap();
    let g = tree.root().create("ffi").unwrap();
    let mut ffi = Vec::new();
    for _ in 0..rounds {
        let t0 = Instant::now();
        for _ in 0..PAIRS * 5 {
            let _ = g.charge(4096, ChargeFlags::NONE).unwrap();
            g.uncharge(4096).unwrap();
        }
        ffi.push(t0.elapsed().as_nanos() as f64 / (PAIRS * 5) as f64);
    }
    println!("ns per pair: {:.1}\n", median(&mut ffi));

    println!("## The tests' queries, 10 M rows, seconds (no spill)\n");
    println!("| pool | sort | aggregate |");
    println!("|---|---|---|");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let names: Vec<&str> = pools(4 << 30).iter().map(|p| p.0).collect();
    let mut times = vec![[Vec::new(), Vec::new()]; names.len()];
    for _ in 0..rounds {
        for (qi, (sql, ordered)) in [
            (common::sort_sql(common::ROWS), true),
            (common::aggregate_sql(common::ROWS), false),
        ]
        .iter()
        .enumerate()
        {
            for (pi, (_, pool)) in pools(4 << 30).into_iter().enumerate() {
                let t0 = Instant::now();
                let out = rt.block_on(common::run(pool, sql, *ordered)).unwrap();
                times[pi][qi].push(t0.elapsed().as_secs_f64());
                assert_eq!(out.spills, 0);
            }
        }
    }
    for (pi, name) in names.iter().enumerate() {
        println!(
            "| {name} | {:.2} | {:.2} |",
            median(&mut times[pi][0]),
            median(&mut times[pi][1])
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("\nload after: {}", load.trim());
}
