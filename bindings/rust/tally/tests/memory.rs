//! The safe API of memory groups: limits, charges, lifetimes, bad input.

use std::os::fd::AsRawFd;
use tally::{
    ChargeFlags, Charged, Error, FlushMode, MemoryFile, MemoryStat, MemoryTree, ReadMode,
    BYTES_MAX, UNLIMITED,
};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn handles_are_send_and_sync_where_the_c_contracts_allow() {
    assert_send_sync::<tally::MemoryTree>();
    assert_send_sync::<tally::MemoryGroup>();
    assert_send_sync::<tally::Counter>();
    assert_send_sync::<tally::StatsTree>();
    assert_send_sync::<tally::StatsGroup>();
    assert_send_sync::<tally::Exporter>();
}

#[test]
fn a_charge_over_max_is_refused_with_limit_exceeded_and_changes_nothing() {
    let tree = MemoryTree::new().unwrap();
    let q = tree.root().create("q").unwrap();
    q.set_max(1 << 20).unwrap();
    assert_eq!(q.charge(1 << 19, ChargeFlags::NONE), Ok(Charged::UnderHigh));
    let err = q.charge((1 << 19) + 1, ChargeFlags::NONE).unwrap_err();
    assert_eq!(err, Error::LimitExceeded);
    assert_eq!(err.errno(), 12);
    assert_eq!(q.usage(ReadMode::Drain).value, 1 << 19);
    assert_eq!(q.events().0.max, 1);
    q.uncharge(1 << 19).unwrap();
    assert_eq!(q.usage(ReadMode::Drain).value, 0);
}

#[test]
fn a_parent_max_holds_its_children_together() {
    let tree = MemoryTree::new().unwrap();
    let pool = tree.root().create("pool").unwrap();
    pool.set_max(3 << 20).unwrap();
    let a = pool.create("a").unwrap();
    let b = pool.create("b").unwrap();
    a.set_max(2 << 20).unwrap();
    b.set_max(2 << 20).unwrap();
    assert!(a.charge(2 << 20, ChargeFlags::NONE).is_ok());
    assert_eq!(a.charge(1, ChargeFlags::NONE), Err(Error::LimitExceeded));
    assert!(b.charge(1 << 20, ChargeFlags::NONE).is_ok());
    assert_eq!(b.charge(1, ChargeFlags::NONE), Err(Error::LimitExceeded));
    assert_eq!(pool.usage(ReadMode::Drain).value, 3 << 20);
    assert_eq!(pool.events().0.max, 2, "hierarchical max events");
    a.uncharge(2 << 20).unwrap();
    b.uncharge(1 << 20).unwrap();
    assert_eq!(pool.usage(ReadMode::Drain).value, 0);
}

#[test]
fn a_charge_above_high_says_over_high() {
    let tree = MemoryTree::with_batch(4096, 4096).unwrap();
    let g = tree.root().create("g").unwrap();
    g.set_high(8192).unwrap();
    assert_eq!(g.charge(16384, ChargeFlags::NONE), Ok(Charged::OverHigh));
    assert!(g.events().0.high >= 1);
    g.uncharge(16384).unwrap();
}

#[test]
fn names_the_library_refuses_are_invalid_argument() {
    let tree = MemoryTree::new().unwrap();
    let root = tree.root();
    for bad in ["", "a/b", "nul\0byte", &"x".repeat(256)] {
        assert_eq!(
            root.create(bad).unwrap_err(),
            Error::InvalidArgument,
            "{bad:?}"
        );
    }
    let _g = root.create(&"x".repeat(255)).unwrap();
    let _a = root.create("a").unwrap();
    assert_eq!(root.create("a").unwrap_err(), Error::AlreadyExists);
    assert_eq!(tree.find("nope").unwrap_err(), Error::NotFound);
    assert_eq!(tree.find("a//b").unwrap_err(), Error::InvalidArgument);
}

#[test]
fn limits_out_of_range_are_invalid_argument() {
    let tree = MemoryTree::new().unwrap();
    let g = tree.root().create("g").unwrap();
    assert_eq!(g.set_max(usize::MAX).unwrap_err(), Error::InvalidArgument);
    assert_eq!(
        g.set_high(UNLIMITED + 1).unwrap_err(),
        Error::InvalidArgument
    );
    g.set_max(UNLIMITED).unwrap();
    assert_eq!(g.limits().max, UNLIMITED);
    g.set_max(4096).unwrap();
    assert_eq!(g.limits().max, 4096);
    assert_eq!(
        MemoryTree::with_batch(2 << 30, 0).err(),
        Some(Error::InvalidArgument),
        "a batch over 1 GiB"
    );
}

#[test]
fn charges_larger_than_bytes_max_are_invalid_argument() {
    let tree = MemoryTree::new().unwrap();
    let g = tree.root().create("g").unwrap();
    for bad in [0, BYTES_MAX + 1, UNLIMITED, usize::MAX] {
        assert_eq!(
            g.charge(bad, ChargeFlags::NONE).unwrap_err(),
            Error::InvalidArgument
        );
        assert_eq!(g.uncharge(bad).unwrap_err(), Error::InvalidArgument);
    }
    // The largest charge is accepted by a group without a limit.
    assert_eq!(
        g.charge(BYTES_MAX, ChargeFlags::NONE),
        Ok(Charged::UnderHigh)
    );
    g.uncharge(BYTES_MAX).unwrap();
}

#[test]
fn an_uncharge_of_more_than_was_charged_is_an_underflow() {
    let tree = MemoryTree::with_batch(4096, 4096).unwrap();
    let g = tree.root().create("g").unwrap();
    assert!(g.charge(4096, ChargeFlags::NONE).is_ok());
    assert_eq!(g.uncharge(1 << 30).unwrap_err(), Error::Underflow);
    g.uncharge(4096).unwrap();
    assert_eq!(g.usage(ReadMode::Drain).value, 0);
}

#[test]
fn set_max_below_the_usage_is_busy_and_keeps_the_old_max() {
    let tree = MemoryTree::new().unwrap();
    let g = tree.root().create("g").unwrap();
    g.set_max(1 << 20).unwrap();
    assert!(g.charge(1 << 19, ChargeFlags::NONE).is_ok());
    assert_eq!(g.set_max(1 << 10).unwrap_err(), Error::Busy);
    assert_eq!(g.limits().max, 1 << 20);
    g.uncharge(1 << 19).unwrap();
}

#[test]
fn nofail_and_noblock_flags_reach_the_library() {
    let tree = MemoryTree::with_batch(4096, 4096).unwrap();
    let g = tree.root().create("g").unwrap();
    g.set_max(8192).unwrap();
    assert_eq!(
        g.charge(16384, ChargeFlags::NOFAIL).unwrap_err(),
        Error::TooBig
    );
    assert!(g.charge(8192, ChargeFlags::NOFAIL).is_ok());
    assert!(
        g.charge(4096, ChargeFlags::NOFAIL).is_ok(),
        "over max with NOFAIL"
    );
    g.uncharge(12288).unwrap();
    let e = g
        .charge(16384, ChargeFlags::NOBLOCK | ChargeFlags::NORECLAIM)
        .unwrap_err();
    assert_eq!(e, Error::WouldBlock);
}

#[test]
fn destroying_a_group_moves_its_charge_to_the_parent_and_frees_it_after_the_last_handle() {
    let tree = MemoryTree::new().unwrap();
    let p = tree.root().create("p").unwrap();
    let c = p.create("c").unwrap();
    let c2 = c.clone();
    assert!(c.charge(8192, ChargeFlags::NONE).is_ok());
    assert_eq!(
        p.destroy().unwrap_err(),
        Error::Busy,
        "a group with a child"
    );
    assert_eq!(tree.root().destroy().unwrap_err(), Error::InvalidArgument);
    c.destroy().unwrap();
    assert_eq!(c.destroy().unwrap_err(), Error::InvalidArgument);
    assert_eq!(c.path().unwrap_err(), Error::InvalidArgument);
    assert_eq!(p.usage(ReadMode::Drain).value, 8192);
    // The destroyed group's handle uncharges its nearest live ancestor.
    c2.uncharge(8192).unwrap();
    assert_eq!(p.usage(ReadMode::Drain).value, 0);
    let before = tree.info();
    assert_eq!(before.zombies, 1);
    drop(c);
    assert_eq!(tree.info().zombies, 1, "one handle left");
    drop(c2);
    // Freed once its last handle is put (after a grace period).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while tree.info().zombies != 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(tree.info().zombies, 0);
    assert_eq!(tree.info().groups, 2, "root and p");
}

#[test]
fn a_group_keeps_its_tree_alive_after_the_tree_value_is_dropped() {
    // There is no way to destroy a tree under its groups: each handle
    // holds the tree, so this is the only order a program can write.
    let tree = MemoryTree::new().unwrap();
    let g = tree.root().create("g").unwrap();
    drop(tree);
    assert!(g.charge(4096, ChargeFlags::NONE).is_ok());
    assert_eq!(g.path().unwrap(), "g");
    g.uncharge(4096).unwrap();
    assert_eq!(g.usage(ReadMode::Drain).value, 0);
}

#[test]
fn groups_move_between_threads() {
    let tree = MemoryTree::new().unwrap();
    let g = tree.root().create("g").unwrap();
    g.set_max(64 << 20).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let g = g.clone();
            std::thread::spawn(move || {
                for _ in 0..10_000 {
                    assert!(g.charge(4096, ChargeFlags::NONE).is_ok());
                    g.uncharge(4096).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(g.usage(ReadMode::Drain).value, 0);
}

#[test]
fn with_current_sets_the_threads_group_and_restores_it_also_on_panic() {
    let tree = MemoryTree::new().unwrap();
    let a = tree.root().create("a").unwrap();
    let b = tree.root().create("b").unwrap();
    assert!(!a.is_current());
    a.with_current(|| {
        assert!(a.is_current());
        b.with_current(|| assert!(b.is_current() && !a.is_current()));
        assert!(a.is_current());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            b.with_current(|| panic!("inside b"))
        }));
        assert!(r.is_err());
        assert!(a.is_current(), "restored after the panic");
    });
    assert!(!a.is_current() && !b.is_current());
}

#[test]
fn memory_stat_items_and_files_read_back() {
    let tree = MemoryTree::new().unwrap();
    let p = tree.root().create("p").unwrap();
    let c = p.create("c").unwrap();
    c.stat_add(MemoryStat::Anon, 4096).unwrap();
    c.stat_add(MemoryStat::Pgfault, 3).unwrap();
    assert_eq!(
        c.stat_add(MemoryStat::Pgfault, -1).unwrap_err(),
        Error::InvalidArgument
    );
    assert_eq!(
        c.stat(MemoryStat::Anon, FlushMode::Force).unwrap(),
        (4096, 4096)
    );
    assert_eq!(
        p.stat(MemoryStat::Anon, FlushMode::Force).unwrap(),
        (4096, 0)
    );
    assert_eq!(MemoryStat::Anon.name(), "anon");
    let stat = c.render(MemoryFile::Stat, false).unwrap();
    assert!(stat.contains("anon 4096\n"), "{stat}");
    assert!(stat.contains("pgfault 3\n"), "{stat}");
    c.set_max(1 << 20).unwrap();
    let limits = c.render(MemoryFile::Limits, false).unwrap();
    assert!(limits.contains("memory.max 1048576"), "{limits}");
    let json = c.render(MemoryFile::All, true).unwrap();
    assert!(
        json.starts_with('{') && json.trim_end().ends_with('}'),
        "{json}"
    );
}

#[test]
fn the_events_fd_counts_events() {
    let tree = MemoryTree::new().unwrap();
    let g = tree.root().create("g").unwrap();
    g.set_max(4096).unwrap();
    let fd = g.events_fd().unwrap().as_raw_fd();
    assert!(g.charge(8192, ChargeFlags::NONE).is_err());
    let mut n = [0u8; 8];
    let file = std::fs::File::from(g.events_fd().unwrap().try_clone_to_owned().unwrap());
    use std::io::Read;
    (&file).read_exact(&mut n).unwrap();
    assert!(u64::from_ne_bytes(n) >= 1);
    assert!(fd >= 0);
}

#[test]
fn peak_follows_the_highest_usage() {
    let tree = MemoryTree::with_batch(4096, 4096).unwrap();
    let g = tree.root().create("g").unwrap();
    assert!(g.charge(1 << 20, ChargeFlags::NONE).is_ok());
    g.uncharge(1 << 20).unwrap();
    assert!(g.peak(false) >= 1 << 20);
    g.drain();
    g.peak(true);
    assert_eq!(g.peak(false), 0);
}
