//! The layering of the source tree (README "Layout"), checked on the text of
//! the sources:
//! * the safe core (`src/`) never imports the C layer (`capi/`): only
//!   `src/lib.rs` names it, to declare the module;
//! * the vocabulary (`fi/`) imports neither the core nor the C layer;
//! * no two core modules import each other (`cq` and `cntr`, `credits` and
//!   `srq` did), except the pairs listed in `KNOWN_CYCLES` with their reason;
//!   a file of a split module (`cq/wrid.rs`) counts as part of that module.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Pairs of modules that still import each other, and why.
const KNOWN_CYCLES: &[(&str, &str, &str)] = &[
    ("ep", "info", "an fi_info's handle holds a connection request or a passive endpoint (ep), which are opened from an fi_info"),
    (
        "dgram::info",
        "info",
        "fi_getinfo dispatches FI_EP_DGRAM requests to dgram::info, which answers them with info's shared hint matching",
    ),
    (
        "dgram::ep",
        "info",
        "an fi_info carries FI_ADDR_IB_UD addresses (dgram::UdName), and DGRAM endpoints are opened from an fi_info \
         (as ep/info; the scan found it once a split module's files counted as the module)",
    ),
];

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a source file: comments and unit-test modules removed.
fn code(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            // Unit tests sit at the end of a module (or in a file of their own).
            break;
        }
        let l = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Every `crate::a::b` and `super::a` path in `code`, as module paths from the crate root.
fn paths(code: &str, module: &str) -> Vec<String> {
    let mut v = Vec::new();
    let parent = module.rsplit_once("::").map(|(p, _)| p.to_string()).unwrap_or_default();
    for (prefix, base) in [("crate::", String::new()), ("super::", parent)] {
        let mut rest = code;
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().last();
            rest = &rest[i + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
            let p = rest[..end].trim_end_matches(':');
            if p.is_empty() {
                continue;
            }
            v.push(if base.is_empty() { p.to_string() } else { format!("{base}::{p}") });
        }
    }
    v
}

/// Whether module `a` is module `t` or one of its files/children (`cq::wrid` is within `cq`).
fn within(a: &str, t: &str) -> bool {
    a == t || a.starts_with(&format!("{t}::"))
}

fn module_of(root: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts.join("::")
}

#[test]
fn core_never_imports_the_c_layer_and_vocabulary_imports_nothing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rs_files(&root.join("src"), &mut files);
    assert!(files.len() > 30, "found the sources");
    let mut bad = Vec::new();
    for f in &files {
        if f.ends_with("src/lib.rs") {
            continue;
        }
        let c = code(&fs::read_to_string(f).unwrap());
        if c.contains("crate::capi") || c.contains("capi::") {
            bad.push(f.display().to_string());
        }
    }
    assert!(bad.is_empty(), "the core imports capi/: {bad:?}");
    let mut fi = Vec::new();
    rs_files(&root.join("fi"), &mut fi);
    assert!(fi.len() >= 2);
    for f in &fi {
        let c = code(&fs::read_to_string(f).unwrap());
        for p in paths(&c, "fi") {
            assert!(p.starts_with("fi"), "{} imports crate::{p}: fi/ must sit below both layers", f.display());
        }
    }
}

#[test]
fn no_two_core_modules_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&root, &mut files);
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut texts = Vec::new();
    for f in &files {
        if f.components().any(|c| c.as_os_str() == "tests") {
            continue; // unit tests may use anything
        }
        texts.push((module_of(&root, f), code(&fs::read_to_string(f).unwrap())));
    }
    let names: BTreeSet<String> = texts.iter().map(|(m, _)| m.clone()).collect();
    for (m, c) in &texts {
        let d = deps.entry(m.clone()).or_default();
        for p in paths(c, m) {
            // The longest module that the path starts with.
            let parts: Vec<&str> = p.split("::").collect();
            if let Some(target) = (1..=parts.len()).rev().map(|k| parts[..k].join("::")).find(|c| names.contains(c)) {
                // A module and its own children (`super::*` of a split file) are one unit.
                if !within(&target, m) && !within(m, &target) {
                    d.insert(target);
                }
            }
        }
    }
    // cq (split into src/cq/) takes the counters it bumps from cntr, in one of its files.
    assert!(
        deps.iter().any(|(m, d)| (m == "cq" || m.starts_with("cq::")) && d.contains("cntr")),
        "the scan sees cq's imports"
    );
    // A file of a split module belongs to it (cq::wrid is cq's): importing `cq` reaches what cq
    // re-exports from its files, so `b` importing `cq` closes a circle with `cq::wrid` importing `b`.
    let mut cycles = BTreeSet::new();
    for (a, da) in &deps {
        for b in da {
            if deps.get(b).is_some_and(|db| db.iter().any(|t| within(a, t))) {
                cycles.insert(if a < b { (a.clone(), b.clone()) } else { (b.clone(), a.clone()) });
            }
        }
    }
    let known: BTreeSet<(String, String)> = KNOWN_CYCLES.iter().map(|(a, b, _)| (a.to_string(), b.to_string())).collect();
    let new: Vec<_> = cycles.iter().filter(|c| !known.contains(*c)).collect();
    assert!(new.is_empty(), "modules that import each other: {new:?}");
    for k in &known {
        assert!(cycles.contains(k), "{k:?} no longer import each other: remove it from KNOWN_CYCLES");
    }
}
