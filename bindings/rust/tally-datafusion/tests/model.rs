//! Random grow / shrink / try_grow sequences from several threads against
//! an exact model of the hierarchical max (the pool's and each query's).
//!
//! Seeded, so that a failure names the seed that reproduces it.

use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use tally::ReadMode;
use tally_datafusion::TallyMemoryPool;

const PAGE: usize = 4096;
const POOL_MAX: usize = 256 * PAGE;
const QUERY_MAX: [usize; 2] = [160 * PAGE, 192 * PAGE];
const THREADS: usize = 4;
const SEEDS: [u64; 6] = [1, 2, 3, 0x5eed, 0xdead_beef, 0x1234_5678_9abc];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545f4914f6cdd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The exact state: bytes held by each query and by the pool.
#[derive(Default)]
struct Model {
    query: [usize; 2],
    pool: usize,
}

struct Setup {
    pool: TallyMemoryPool,
    queries: Vec<TallyMemoryPool>,
}

fn setup() -> Setup {
    let pool = TallyMemoryPool::new(POOL_MAX).unwrap();
    let queries = (0..2)
        .map(|q| pool.for_query(&format!("q{q}"), QUERY_MAX[q]).unwrap())
        .collect();
    Setup { pool, queries }
}

fn reservation(s: &Setup, t: usize) -> MemoryReservation {
    let qp: Arc<dyn MemoryPool> = Arc::new(s.queries[t % 2].clone());
    MemoryConsumer::new(format!("t{t}")).register(&qp)
}

/// Every operation under one lock, from several threads (so on several
/// CPUs' stocks): each try_grow must succeed exactly when the model says
/// it fits, and after each operation the pool's and the queries' usage
/// must be the model's.
#[test]
fn serialised_operations_from_several_threads_follow_the_model_exactly() {
    for seed in SEEDS {
        let s = setup();
        let model = Arc::new(Mutex::new(Model::default()));
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let (s, model) = (&s, model.clone());
                scope.spawn(move || {
                    let mut rng = Rng(seed.wrapping_mul(31).wrapping_add(t as u64 + 1));
                    let r = reservation(s, t);
                    let q = t % 2;
                    for step in 0..3000 {
                        let n = (1 + rng.below(48) as usize) * PAGE - rng.below(2) as usize * 7;
                        let op = rng.below(10);
                        let mut m = model.lock().unwrap();
                        let fits = m.pool + n <= POOL_MAX && m.query[q] + n <= QUERY_MAX[q];
                        match op {
                            0..=4 => {
                                let ok = r.try_grow(n).is_ok();
                                assert_eq!(ok, fits, "seed {seed} thread {t} step {step}: try_grow({n}) with {:?}/{}", m.query, m.pool);
                                if ok {
                                    m.pool += n;
                                    m.query[q] += n;
                                }
                            }
                            // grow cannot fail; kept small so that the
                            // model returns under the max.
                            5 if n <= 4 * PAGE => {
                                r.grow(n);
                                m.pool += n;
                                m.query[q] += n;
                            }
                            _ => {
                                let k = (rng.below(r.size() as u64 + 1)) as usize;
                                r.shrink(k);
                                m.pool -= k;
                                m.query[q] -= k;
                            }
                        }
                        // Every other thread waits for the lock: the
                        // precise reads are exact.
                        assert_eq!(s.pool.reserved(), m.pool, "seed {seed} step {step}: pool");
                        assert_eq!(s.queries[q].reserved(), m.query[q], "seed {seed} step {step}: query");
                    }
                    let mut m = model.lock().unwrap();
                    m.pool -= r.size();
                    m.query[q] -= r.size();
                });
            }
        });
        assert_eq!(
            s.pool.pool_group().usage(ReadMode::Drain).value,
            0,
            "seed {seed}"
        );
    }
}

/// Threads run try_grow and shrink at once.  Where every thread's
/// holdings together fit under each max, no try_grow may fail; where
/// they do not, no level may ever go over its max (its peak says so);
/// in both, the usage once the threads stop is what they hold.
#[test]
fn concurrent_operations_never_refuse_what_fits_never_overshoot_and_end_exact() {
    for seed in SEEDS {
        for overcommit in [false, true] {
            let s = setup();
            for g in s
                .queries
                .iter()
                .map(|q| q.group())
                .chain([s.pool.pool_group()])
            {
                g.peak(true);
            }
            // Each of 4 threads holds at most a quarter of the smallest
            // max when not overcommitted.
            let cap = if overcommit {
                POOL_MAX
            } else {
                QUERY_MAX[0] / 4
            };
            let stop = AtomicBool::new(false);
            let start = Barrier::new(THREADS);
            let held: Vec<usize> = std::thread::scope(|scope| {
                let workers: Vec<_> = (0..THREADS)
                    .map(|t| {
                        let (s, start) = (&s, &start);
                        scope.spawn(move || {
                            let mut rng = Rng(seed ^ (t as u64 + 1) << 32);
                            let r = reservation(s, t);
                            start.wait();
                            let mut refused = 0u64;
                            for _ in 0..20_000 {
                                let n = (1 + rng.below(16) as usize) * PAGE;
                                if rng.below(2) == 0 && r.size() + n <= cap {
                                    if r.try_grow(n).is_err() {
                                        refused += 1;
                                    }
                                } else {
                                    r.shrink(rng.below(r.size() as u64 + 1) as usize);
                                }
                            }
                            if !overcommit {
                                assert_eq!(
                                    refused, 0,
                                    "seed {seed}: a charge that fitted was refused"
                                );
                            }
                            // Keep holding until every thread stopped.
                            (r, refused)
                        })
                    })
                    .collect();
                let sampler = scope.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        let p = s.pool.pool_group().usage(ReadMode::Approx).value;
                        assert!(p <= POOL_MAX, "seed {seed}: pool at {p}");
                        for (q, h) in s.queries.iter().enumerate() {
                            let u = h.group().usage(ReadMode::Approx).value;
                            assert!(u <= QUERY_MAX[q], "seed {seed}: q{q} at {u}");
                        }
                    }
                });
                let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
                stop.store(true, Ordering::Relaxed);
                sampler.join().unwrap();
                let held = results.iter().map(|(r, _)| r.size()).collect();
                let mut by_query = [0usize; 2];
                for (t, (r, _)) in results.iter().enumerate() {
                    by_query[t % 2] += r.size();
                }
                for (query, held) in s.queries.iter().zip(by_query) {
                    assert_eq!(query.group().usage(ReadMode::Drain).value, held);
                }
                if overcommit {
                    println!(
                        "info: seed {seed}: refusals {:?}",
                        results.iter().map(|r| r.1).collect::<Vec<_>>()
                    );
                }
                held
            });
            let _ = held;
            for (q, h) in s.queries.iter().enumerate() {
                let peak = h.group().peak(false);
                assert!(peak <= QUERY_MAX[q], "seed {seed}: q{q} peaked at {peak}");
            }
            let peak = s.pool.pool_group().peak(false);
            assert!(peak <= POOL_MAX, "seed {seed}: pool peaked at {peak}");
            assert_eq!(
                s.pool.pool_group().usage(ReadMode::Drain).value,
                0,
                "seed {seed}: left"
            );
        }
    }
}
