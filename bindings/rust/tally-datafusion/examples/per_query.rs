//! Per-query memory limits for DataFusion with tally, and a /metrics
//! endpoint.
//!
//! One process-wide pool of 96 MiB; each query gets its own max under it
//! (`for_query`).  Two queries run at once and spill to stay within
//! their max; a third, given too little, fails with ResourcesExhausted.
//! A small HTTP server serves the pool's groups in the Prometheus text
//! format on /metrics, which the program then scrapes itself.

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use tally::ExportFormat;
use tally_datafusion::TallyMemoryPool;

const MIB: usize = 1 << 20;

/// Runs `sql` with `pool`; returns its row count and whether it spilled.
async fn run(pool: TallyMemoryPool, sql: &str) -> Result<(usize, bool)> {
    let pool: Arc<dyn MemoryPool> = Arc::new(pool);
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(pool)
        .build_arc()?;
    let config = SessionConfig::new().with_target_partitions(2);
    let ctx = SessionContext::new_with_config_rt(config, runtime);
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    let batches = collect(plan.clone(), ctx.task_ctx()).await?;
    let rows = batches.iter().map(|b| b.num_rows()).sum();
    Ok((rows, spilled(&plan)))
}

fn spilled(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.metrics().and_then(|m| m.spill_count()).unwrap_or(0) > 0
        || plan.children().into_iter().any(spilled)
}

/// Serves GET /metrics with the pool's exposition, on its own thread.
fn serve_metrics(pool: TallyMemoryPool) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = answer(&pool, stream);
        }
    });
    Ok(addr)
}

fn answer(pool: &TallyMemoryPool, mut stream: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(&stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // The whole request before the answer: a socket closed with bytes
    // of it unread resets the connection under the client's read.
    let mut header = String::new();
    while reader.read_line(&mut header)? > 0 && header.trim_end() != "" {
        header.clear();
    }
    let (status, body) = if request_line.starts_with("GET /metrics ") {
        match pool.metrics(ExportFormat::Prometheus) {
            Ok(text) => ("200 OK", text),
            Err(e) => ("500 Internal Server Error", format!("{e}\n")),
        }
    } else {
        ("404 Not Found", "not found\n".to_owned())
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// A scrape, as Prometheus would make it: the status line and the body.
fn scrape(addr: &str) -> std::io::Result<(String, String)> {
    let mut s = TcpStream::connect(addr)?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n")?;
    let mut response = String::new();
    s.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.lines().next().unwrap_or("").to_owned();
    Ok((status, body.to_owned()))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let pool = TallyMemoryPool::new(96 * MIB)?;
    let addr = serve_metrics(pool.clone())?;

    // Two queries at once, 64 MiB each: together they may not pass the
    // pool's 96 MiB, each alone not its own 64 MiB.
    let sort = pool.for_query("sort", 64 * MIB)?;
    let agg = pool.for_query("aggregate", 64 * MIB)?;
    let (sorted, grouped) = tokio::join!(
        run(
            sort.clone(),
            "SELECT value FROM range(4000000) ORDER BY (value * 2654435761) % 10000019"
        ),
        run(
            agg.clone(),
            "SELECT value % 1000003 AS k, count(*) FROM range(4000000) GROUP BY k"
        )
    );
    let (rows, spilled) = sorted?;
    println!("sort: {rows} rows, spilled: {spilled}");
    let (rows, spilled) = grouped?;
    println!("aggregate: {rows} groups, spilled: {spilled}");

    // A query given 1 MiB cannot even start its sort.
    let tiny = pool.for_query("tiny", MIB)?;
    match run(
        tiny.clone(),
        "SELECT value FROM range(4000000) ORDER BY value DESC",
    )
    .await
    {
        Err(e) => match e.find_root() {
            DataFusionError::ResourcesExhausted(msg) => {
                let group = msg.split(" - ").nth(1).unwrap_or("");
                let group = group.split(" is at").next().unwrap_or("");
                println!("tiny: ResourcesExhausted ({group})");
            }
            other => println!("tiny: unexpected error: {other}"),
        },
        Ok(_) => println!("tiny: ran within 1 MiB"),
    }

    // Scrape /metrics while the query handles (and so their groups) live.
    let (status, body) = scrape(&addr)?;
    println!("GET /metrics: {status}");
    for q in ["sort", "aggregate", "tiny"] {
        let group = format!("group=\"/datafusion/{q}\"");
        let value = |family: &str| {
            body.lines()
                .find(|l| l.starts_with(family) && l.contains(&group))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        let max = value("datafusion_memory_max_bytes{");
        let peak = value("datafusion_memory_peak_bytes{");
        println!(
            "{q}: max {} MiB, peak within max: {}",
            max / MIB as f64,
            peak <= max
        );
    }
    let refused = body
        .lines()
        .filter_map(|l| {
            l.strip_prefix("datafusion_memory_events_max_total{group=\"/datafusion/tiny\"} ")
        })
        .any(|v| v != "0");
    println!("tiny: its refusals counted in memory.events: {refused}");
    drop((sort, agg, tiny));
    println!(
        "groups left after the queries: {}",
        pool.tree().info().groups - 2
    );
    Ok(())
}
