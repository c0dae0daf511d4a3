//! Counters, statistics trees and the exporter through the safe API.

use tally::{
    ChargeFlags, Counter, Error, ExportFormat, Exporter, FlushMode, MemoryTree, StatKind, StatsTree,
};

#[test]
fn counter_adds_from_many_threads_sum_exactly() {
    let c = std::sync::Arc::new(Counter::new(32).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let c = c.clone();
            std::thread::spawn(move || {
                for _ in 0..100_000 {
                    c.add(i + 1);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(c.precise(), 1_000_000);
    let (under, over) = c.accuracy();
    assert_eq!(over, 0);
    assert!(c.approximate() <= 1_000_000 && c.approximate() >= 1_000_000 - under as i64);
    c.set(5);
    assert_eq!(c.precise(), 5);
}

#[test]
fn a_counter_batch_that_is_not_a_power_of_two_is_invalid_argument() {
    assert_eq!(Counter::new(3).err(), Some(Error::InvalidArgument));
    assert_eq!(Counter::new(0).err(), Some(Error::InvalidArgument));
}

#[test]
fn stats_groups_count_hierarchically_and_destroy_keeps_the_sums() {
    let t = StatsTree::new(&[("bytes", StatKind::State), ("requests", StatKind::Event)]).unwrap();
    let bytes = t.stat_index("bytes").unwrap();
    let req = t.stat_index("requests").unwrap();
    assert_eq!(t.stat_index("nope").unwrap_err(), Error::NotFound);
    let root = t.root();
    let a = root.create("a").unwrap();
    let b = a.create("b").unwrap();
    b.add(bytes, 100).unwrap();
    b.add(req, 2).unwrap();
    assert_eq!(b.add(req, -1).unwrap_err(), Error::InvalidArgument);
    assert_eq!(b.add(99, 1).unwrap_err(), Error::InvalidArgument);
    assert_eq!(a.read(bytes, FlushMode::Force).unwrap(), (100, 0));
    assert_eq!(b.path().unwrap(), "a/b");
    assert!(root
        .render(FlushMode::Force)
        .unwrap()
        .contains("requests 2"));
    assert_eq!(a.create("b").err().map(|e| e.errno()), Some(17));
    assert_eq!(root.create("x/y").err(), Some(Error::InvalidArgument));
    b.destroy().unwrap();
    assert_eq!(a.read(req, FlushMode::Force).unwrap(), (2, 0));
    assert_eq!(t.root().destroy().unwrap_err(), Error::InvalidArgument);
}

#[test]
fn a_bad_schema_is_invalid_argument() {
    assert!(StatsTree::new(&[]).is_err());
    assert_eq!(
        StatsTree::new(&[("a", StatKind::State), ("a", StatKind::Event)]).err(),
        Some(Error::InvalidArgument)
    );
    assert_eq!(
        StatsTree::new(&[("has space", StatKind::State)]).err(),
        Some(Error::InvalidArgument)
    );
}

#[test]
fn the_exporter_writes_prometheus_and_openmetrics_of_a_memory_tree() {
    let tree = MemoryTree::new().unwrap();
    let q = tree.root().create("q1").unwrap();
    q.set_max(1 << 20).unwrap();
    assert!(q.charge(4096, ChargeFlags::NONE).is_ok());
    assert!(q.charge(2 << 20, ChargeFlags::NONE).is_err());
    let mut e = Exporter::new(&[("host", "test")]).unwrap();
    e.add_memory(&tree, "app", true).unwrap();
    let prom = e.render(ExportFormat::Prometheus).unwrap();
    assert!(
        prom.contains("app_memory_max_bytes{group=\"/q1\",host=\"test\"} 1048576\n"),
        "{prom}"
    );
    assert!(
        prom.contains("app_memory_max_bytes{group=\"/\",host=\"test\"} +Inf\n"),
        "{prom}"
    );
    assert!(
        prom.contains("app_memory_events_max_total{group=\"/q1\",host=\"test\"} 1\n"),
        "{prom}"
    );
    assert!(
        prom.contains("# TYPE app_memory_current_bytes gauge"),
        "{prom}"
    );
    let om = e.render(ExportFormat::OpenMetrics).unwrap();
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert_eq!(
        e.add_memory(&tree, "app", false).unwrap_err(),
        Error::AlreadyExists
    );
    assert_eq!(
        Exporter::new(&[("job", "x")]).err(),
        Some(Error::InvalidArgument)
    );
    assert_eq!(
        e.add_memory(&tree, "bad-prefix", false).unwrap_err(),
        Error::InvalidArgument
    );
    q.uncharge(4096).unwrap();
}

#[test]
fn the_version_is_the_headers() {
    let h = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../include/tally/version.h"
    ))
    .unwrap();
    let part = |name: &str| {
        h.lines()
            .find_map(|l| l.strip_prefix(&format!("#define TALLY_VERSION_{name} ")))
            .unwrap()
            .trim()
            .to_owned()
    };
    let want = format!("{}.{}.{}", part("MAJOR"), part("MINOR"), part("PATCH"));
    assert_eq!(tally::version(), want);
}
