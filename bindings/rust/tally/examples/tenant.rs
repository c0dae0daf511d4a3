//! Four threads charge one query's group under its tenant's max; a
//! charge over that max is refused and changes nothing.

use std::thread;
use tally::{ChargeFlags, Error, MemoryTree, ReadMode};

fn main() -> tally::Result<()> {
    let tree = MemoryTree::new()?;
    let tenant = tree.root().create("tenant")?;
    tenant.set_max(64 << 20)?;
    let query = tenant.create("q1")?;

    // Each thread its own handle (a reference on the group).
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let q = query.clone();
            thread::spawn(move || -> tally::Result<()> {
                for _ in 0..1000 {
                    let _ = q.charge(4096, ChargeFlags::NONE)?;
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap()?;
    }
    println!("q1: {} bytes", query.usage(ReadMode::Drain).value);

    // 50 MiB more would take the tenant over its 64 MiB.
    assert_eq!(
        query.charge(50 << 20, ChargeFlags::NONE),
        Err(Error::LimitExceeded)
    );
    println!("tenant: {} bytes", tenant.usage(ReadMode::Drain).value);

    query.uncharge(4 * 1000 * 4096)?;
    query.destroy()?;
    Ok(())
}
