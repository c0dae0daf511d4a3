//! The declarations of `src/lib.rs` against the C headers.
//!
//! The test reads `src/lib.rs`, writes a C file that includes the public
//! headers and then, for every item declared there:
//! - redeclares each function with the C types of its Rust declaration:
//!   C refuses a redeclaration whose type differs from the header's
//!   prototype ("conflicting types"), so every parameter, its pointee's
//!   `const` and the return type are compared by the C compiler itself;
//! - asserts each structure's size and alignment, and each field's offset
//!   and type, as Rust lays them out;
//! - asserts each constant's value and each enum's size.
//!
//! It compiles that file with `-Werror`; any mismatch fails the test with
//! the compiler's message.  A function used by the safe crate but not
//! declared here does not compile at all.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::mem::{align_of, offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;
use tally_sys::*;

/// Rust's layout of a structure: (struct, field or "", offset or size).
macro_rules! layout {
    ($t:ident; $($f:ident),*) => {{
        let mut v = vec![(stringify!($t), String::new(), size_of::<$t>(), align_of::<$t>())];
        $(v.push((stringify!($t), stringify!($f).to_owned(), offset_of!($t, $f), 0));)*
        v
    }};
}

fn rust_layouts() -> Vec<(&'static str, String, usize, usize)> {
    [
        layout!(tally_counter; level0, batch, items, domain, bias, under, flags, nr_top, prev, next),
        layout!(tally_memcg_options; domain, batch, max_batch),
        layout!(tally_memcg_limits; min, low, high, max),
        layout!(tally_memcg_range; value, min, max),
        layout!(tally_memcg_info; refills, drains, drain_waits, refusals, groups, zombies,
            underflows, rseq, stock_bytes, group_bytes),
        layout!(tally_stat_desc; name, kind),
        layout!(tally_stats_options; domain, batch, period_ns, clock, clock_arg),
        layout!(tally_stats_info; flushes, root_flushes, groups_flushed, shared_waits, groups,
            fenced, barriers, takeovers, naps, flush_lock_waits, flush_lock_wait_ns,
            flush_lock_long_holds, flush_lock_long_hold_ns, adoptions),
        layout!(tally_export_label; name, value),
        layout!(tally_export_options; format, labels, nr_labels, pid),
        layout!(tally_export_stats_options; prefix, units, mode),
        layout!(tally_export_memcg_options; prefix),
    ]
    .into_iter()
    .flatten()
    .collect()
}

struct Decls {
    structs: Vec<(String, Vec<(String, String)>)>,
    opaque: BTreeSet<String>,
    enums: BTreeSet<String>,
    consts: Vec<(String, String)>,
    fns: Vec<(String, Vec<String>, String)>,
}

/// Splits on commas outside parentheses and angle brackets.
fn split_top(s: &str) -> Vec<String> {
    let (mut depth, mut cur, mut out) = (0i32, String::new(), Vec::new());
    for ch in s.chars() {
        match ch {
            '(' | '<' => depth += 1,
            '>' if cur.ends_with('-') => {}
            ')' | '>' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_owned());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out
}

/// Strips a `name: ` prefix from a parameter.
fn param_type(p: &str) -> &str {
    match p.find(':') {
        Some(i) if !p[..i].contains('(') => p[i + 1..].trim(),
        _ => p.trim(),
    }
}

fn parse(src: &str) -> Decls {
    // Drop comments, then normalise white space.
    let text: String = src
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join(" ");
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut d = Decls {
        structs: Vec::new(),
        opaque: BTreeSet::new(),
        enums: BTreeSet::new(),
        consts: Vec::new(),
        fns: Vec::new(),
    };
    let mut rest = text.as_str();
    while let Some(i) = rest.find("pub struct ") {
        rest = &rest[i + 11..];
        let name = rest[..rest.find(' ').unwrap()].to_owned();
        let body = &rest[rest.find('{').unwrap() + 1..rest.find('}').unwrap()];
        let fields: Vec<(String, String)> = split_top(body)
            .iter()
            .map(|f| {
                let f = f.trim_start_matches("pub ");
                let (n, t) = f.split_once(':').unwrap();
                (n.trim().to_owned(), t.trim().to_owned())
            })
            .collect();
        if fields.len() == 1 && fields[0].0 == "_private" {
            d.opaque.insert(name);
        } else {
            d.structs.push((name, fields));
        }
    }
    for part in text.split(';') {
        let part = part.trim();
        if let Some(i) = part.find("pub type ") {
            d.enums
                .insert(part[i + 9..].split_once(" =").unwrap().0.to_owned());
        } else if let Some(c) = part.find("pub const ").map(|i| &part[i + 10..]) {
            let (name, rest) = c.split_once(':').unwrap();
            d.consts.push((
                name.to_owned(),
                rest.split_once('=').unwrap().1.trim().to_owned(),
            ));
        } else if let Some(i) = part.find("pub fn ") {
            let f = &part[i + 7..];
            let name = f[..f.find('(').unwrap()].to_owned();
            let open = f.find('(').unwrap();
            let mut depth = 0;
            let mut close = open;
            for (j, ch) in f[open..].char_indices() {
                match ch {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            close = open + j;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let params = split_top(&f[open + 1..close])
                .iter()
                .map(|p| param_type(p).to_owned())
                .collect();
            let ret = f[close + 1..]
                .trim()
                .strip_prefix("->")
                .map(|r| r.trim().to_owned())
                .unwrap_or_default();
            d.fns.push((name, params, ret));
        }
    }
    d
}

/// The C type of a Rust type of `src/lib.rs`, with `decl` in its place.
fn c_type(t: &str, d: &Decls, decl: &str) -> String {
    c_type_q(t, d, decl, false)
}

/// As c_type(), of a type that is itself `const` when `konst` (the
/// pointee of a Rust `*const`).
fn c_type_q(t: &str, d: &Decls, decl: &str, konst: bool) -> String {
    let t = t.trim();
    let star = if konst {
        format!("*const {decl}")
    } else {
        format!("*{decl}")
    };
    let with = |base: &str| {
        let base = if konst {
            format!("const {base}")
        } else {
            base.to_owned()
        };
        if decl.is_empty() {
            base
        } else {
            format!("{base} {decl}")
        }
    };
    if let Some(inner) = t.strip_prefix("*mut ") {
        return c_type_q(inner, d, star.trim_end(), false);
    }
    if let Some(inner) = t.strip_prefix("*const ") {
        return c_type_q(inner, d, star.trim_end(), true);
    }
    if let Some(f) = t
        .strip_prefix("Option<unsafe extern \"C\" fn(")
        .and_then(|f| f.strip_suffix('>'))
    {
        let (params, ret) = f.rsplit_once(") -> ").unwrap();
        let params: Vec<String> = split_top(params)
            .iter()
            .map(|p| c_type(param_type(p), d, ""))
            .collect();
        return c_type(ret, d, &format!("(*{decl})({})", params.join(", ")));
    }
    let base = match t {
        "c_int" => "int".to_owned(),
        "c_uint" => "unsigned int".to_owned(),
        "c_long" => "long".to_owned(),
        "c_ulong" => "unsigned long".to_owned(),
        "c_char" => "char".to_owned(),
        "c_void" | "" => "void".to_owned(),
        "usize" => "size_t".to_owned(),
        "u64" => "uint64_t".to_owned(),
        "bool" => "_Bool".to_owned(),
        n if d.enums.contains(n) => format!("enum {n}"),
        n if d.opaque.contains(n) || d.structs.iter().any(|s| s.0 == n) => {
            format!("struct {n}")
        }
        n => panic!("no C type for the Rust type {n:?}: extend c_type()"),
    };
    with(&base)
}

fn c_value(v: &str) -> String {
    v.replace("c_long::MAX", "LONG_MAX")
}

#[test]
fn every_declaration_has_the_headers_type() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.join("../../..");
    let d = parse(&std::fs::read_to_string(manifest.join("src/lib.rs")).unwrap());
    assert!(d.fns.len() >= 50, "only {} functions parsed", d.fns.len());

    let layouts = rust_layouts();
    let mut c = String::from(
        "#include <limits.h>\n#include <stddef.h>\n#include <stdint.h>\n\
         #include <tally/counter.h>\n#include <tally/stats.h>\n\
         #include <tally/memcg.h>\n#include <tally/memcg_current.h>\n\
         #include <tally/export.h>\n#include <tally/version.h>\n\
         #define SAME(T, U) __builtin_types_compatible_p(T, U)\n",
    );
    for (name, params, ret) in &d.fns {
        let params: Vec<String> = params.iter().map(|p| c_type(p, &d, "")).collect();
        let params = if params.is_empty() {
            "void".to_owned()
        } else {
            params.join(", ")
        };
        writeln!(c, "{};", c_type(ret, &d, &format!("{name}({params})"))).unwrap();
    }
    for (name, fields) in &d.structs {
        let (_, _, size, align) = layouts
            .iter()
            .find(|l| l.0 == name && l.1.is_empty())
            .unwrap_or_else(|| panic!("struct {name} missing from rust_layouts()"));
        writeln!(
            c,
            "_Static_assert(sizeof(struct {name}) == {size}, \"size of {name}\");\n\
             _Static_assert(_Alignof(struct {name}) == {align}, \"alignment of {name}\");"
        )
        .unwrap();
        for (f, t) in fields {
            let (_, _, off, _) = layouts
                .iter()
                .find(|l| l.0 == name && &l.1 == f)
                .unwrap_or_else(|| panic!("{name}.{f} missing from rust_layouts()"));
            writeln!(
                c,
                "_Static_assert(offsetof(struct {name}, {f}) == {off}, \"offset of {name}.{f}\");\n\
                 _Static_assert(SAME(__typeof__(((struct {name} *)0)->{f}), {}), \"type of {name}.{f}\");",
                c_type(t, &d, "")
            )
            .unwrap();
        }
        let declared = layouts.iter().filter(|l| l.0 == name).count() - 1;
        assert_eq!(declared, fields.len(), "rust_layouts() of {name}");
    }
    for e in &d.enums {
        writeln!(
            c,
            "_Static_assert(sizeof(enum {e}) == sizeof(unsigned int), \"size of {e}\");"
        )
        .unwrap();
    }
    for (name, value) in &d.consts {
        writeln!(
            c,
            "_Static_assert(({name}) == ({}), \"value of {name}\");",
            c_value(value)
        )
        .unwrap();
    }

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("tally_sys_declarations.c");
    std::fs::write(&file, &c).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=gnu11", "-fsyntax-only", "-Wall", "-Werror", "-I"])
        .arg(root.join("include"))
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(
        out.status.success(),
        "the declarations differ from the headers ({}):\n{}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_wrong_declaration_is_caught() {
    // The check can fail: a parameter's type changed is a conflict.
    let src =
        "extern \"C\" { pub fn tally_memcg_peak(g: *mut tally_memcg, reset: c_int) -> c_long; }\n\
               #[repr(C)] pub struct tally_memcg { _private: [u8; 0], }";
    let d = parse(src);
    let (name, params, ret) = &d.fns[0];
    let params: Vec<String> = params.iter().map(|p| c_type(p, &d, "")).collect();
    let c = format!(
        "#include <tally/memcg.h>\n{};\n",
        c_type(ret, &d, &format!("{name}({})", params.join(", ")))
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("tally_sys_wrong.c");
    std::fs::write(&file, &c).unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=gnu11", "-fsyntax-only", "-Werror", "-I"])
        .arg(root.join("include"))
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{c} compiled");
    assert!(String::from_utf8_lossy(&out.stderr).contains("conflicting types"));
}
