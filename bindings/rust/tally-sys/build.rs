//! Builds libtally for the bindings.
//!
//! By default from this repository's sources, with the flags the Makefile
//! compiles them with (`make print-build` lists both, so the two builds
//! never drift apart), then made into one relocatable object in which
//! only the `tally_` symbols stay global, as `make`'s `libtally.a` is: the
//! library's internal names cannot clash with another C library linked
//! into the same program.  With `TALLY_LIB_DIR` set, links the
//! `libtally.a` found there instead (an installed or `make`-built one).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("tally-sys: cannot run {cmd:?}: {e}"));
    assert!(status.success(), "tally-sys: {cmd:?} failed: {status}");
}

fn main() {
    println!("cargo:rerun-if-env-changed=TALLY_LIB_DIR");
    println!("cargo:rustc-link-lib=pthread");
    println!("cargo:rustc-link-lib=m");
    if let Some(dir) = env::var_os("TALLY_LIB_DIR") {
        println!(
            "cargo:rustc-link-search=native={}",
            Path::new(&dir).display()
        );
        println!("cargo:rustc-link-lib=static=tally");
        return;
    }

    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.join("../../..").canonicalize().unwrap();
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed={}", root.join("Makefile").display());
    println!("cargo:rerun-if-changed={}", root.join("include").display());
    println!("cargo:rerun-if-changed={}", root.join("src").display());

    let listing = Command::new(env::var("MAKE").unwrap_or_else(|_| "make".into()))
        .args(["-s", "--no-print-directory", "HTTP=no", "JEMALLOC=no"])
        .arg("print-build")
        .current_dir(&root)
        .env_remove("MAKEFLAGS")
        .env_remove("CFLAGS")
        .output()
        .expect("tally-sys: cannot run make print-build (is make installed?)");
    assert!(
        listing.status.success(),
        "tally-sys: make print-build failed: {}",
        String::from_utf8_lossy(&listing.stderr)
    );

    let mut build = cc::Build::new();
    build
        .warnings(false)
        .extra_warnings(false)
        .cargo_metadata(false);
    let mut libs = Vec::new();
    for line in String::from_utf8(listing.stdout).unwrap().lines() {
        let Some((kind, value)) = line.split_once(' ') else {
            continue;
        };
        match kind {
            // -Iinclude and -Isrc are relative to the repository.
            "cflag" => match value.strip_prefix("-I") {
                Some(dir) => {
                    build.include(root.join(dir));
                }
                None => {
                    build.flag(value);
                }
            },
            "src" => {
                build.file(root.join(value));
            }
            "lib" => libs.push(value.trim_start_matches("-l").to_owned()),
            _ => {}
        }
    }
    let objects = build.compile_intermediates();
    assert!(!objects.is_empty(), "tally-sys: make listed no sources");

    // One object, only tally_* global: what the Makefile's libtally.a is.
    let combined = out.join("libtally.o");
    let lib = out.join("libtally.a");
    let _ = std::fs::remove_file(&lib);
    run(Command::new(env::var("LD").unwrap_or_else(|_| "ld".into()))
        .arg("-r")
        .arg("-o")
        .arg(&combined)
        .args(&objects));
    run(
        Command::new(env::var("OBJCOPY").unwrap_or_else(|_| "objcopy".into()))
            .args(["--wildcard", "--keep-global-symbol=tally_*"])
            .arg(&combined),
    );
    run(Command::new(env::var("AR").unwrap_or_else(|_| "ar".into()))
        .arg("rcs")
        .arg(&lib)
        .arg(&combined));
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=tally");
    for l in libs {
        println!("cargo:rustc-link-lib={l}");
    }
    println!("cargo:root={}", root.display());
}
