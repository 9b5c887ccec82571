//! The ABI of every libfabric core rsverbs serves, against the mirrors.
//!
//! `abi_layout.rs` proves `fi/abi/` and `fi/consts.rs` equal to the 1.17
//! headers field by field. This test takes the same list (read from
//! `abi_layout.rs`), compiles it against the headers of each other core that
//! `ci/cores.sh` built (`$RSVERBS_CORES/<version>/include`: 2.1.0 in the test
//! command, 1.22.0 and 2.6.0 where built by hand), and compares every size,
//! offset and constant with 1.17's. Each difference must be one the code knows
//! about ([`KNOWN`]: what changed, in which version, and how rsverbs handles
//! it); any other difference, or a known one that did not show up, fails.
//! The `fi_domain_attr` sizes are also checked against `capi/version.rs`'s
//! `domain_attr_size`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../fi/abi/mod.rs"]
#[allow(dead_code, non_camel_case_types)]
mod abi;


/// Differences from 1.17 that rsverbs knows about: (first version with it,
/// line key, what the line is in that version or "absent", how rsverbs handles it).
const KNOWN: &[(u32, &str, &str, &str)] = &[
    // fi_domain_attr: appended fields (capi/version.rs reads them by core and API version, allocates 2.5's).
    (v(1, 20), "size fi_domain_attr", "200", "max_ep_auth_key appended: read for API >= 1.20 on such cores"),
    (v(2, 0), "size fi_domain_attr", "208", "max_group_id appended: read for API >= 2.0"),
    (v(2, 5), "size fi_domain_attr", "224", "max_cntr_value, max_err_cntr_value appended: read for API >= 2.5"),
    // fi_cq_err_entry: src_addr appended (1.20): written for API >= 1.20 (capi/cq.rs).
    (v(1, 20), "size fi_cq_err_entry", "88", "src_addr appended: cq_readerr writes it for API >= 1.20"),
    // fi_mr_attr: appended fields an application may pass; rsverbs reads the 1.17 prefix only.
    (v(1, 20), "size fi_mr_attr", "96", "hmem_data, page_size appended: not read"),
    (v(2, 0), "size fi_mr_attr", "112", "base_mr, sub_mr_cnt appended: not read"),
    // fi_ops_av: three entries appended (2.0); its size field says how long rsverbs' table is.
    (v(1, 20), "size fi_ops_av", "88", "insert_auth_key, lookup_auth_key, set_user_id: FI_CHECK_OP gives -FI_ENOSYS"),
    // fi_mr_modify embeds a fi_mr_attr: rsverbs has no fi_mr_modify (FI_CHECK_OP / -FI_ENOSYS).
    (v(1, 20), "size fi_mr_modify", "104", "embeds the longer fi_mr_attr; not implemented"),
    (v(2, 0), "size fi_mr_modify", "120", "embeds the longer fi_mr_attr; not implemented"),
    // Error codes appended (FI_ENOMR 270 by 1.22, FI_EFIREWALLADDR 271 by 2.6): fi_strerror
    // of the drop-in says "Unknown error" for them; rsverbs returns neither.
    (v(1, 20), "const FI_ERRNO_MAX", "271", "FI_ENOMR appended; rsverbs never returns it"),
    (v(2, 6), "const FI_ERRNO_MAX", "272", "FI_EFIREWALLADDR appended; rsverbs never returns it"),
    // Constants removed or emptied by 1.22 (rsverbs keeps the 1.17 values for 1.x applications).
    (v(1, 22), "const FI_PROV_SPECIFIC", "absent", "unused by rsverbs"),
    (v(1, 22), "const FI_PRIORITY", "absent", "never accepted"),
    (v(1, 22), "const FI_XPU_TRIGGER", "absent", "never accepted"),
    (v(1, 22), "const FI_NOTIFY_FLAGS_ONLY", "0", "mode bit never required"),
    (v(1, 22), "const FI_RESTRICTED_COMP", "0", "mode bit never required"),
    (v(1, 22), "const FI_VARIABLE_MSG", "0", "bit 48 is FI_EXACT_DIRECTED_RECV for API >= 2.0 (src/info/mod.rs)"),
    (v(1, 22), "const FI_EP_SOCK_STREAM", "0", "never offered"),
    (v(1, 22), "const FI_EP_SOCK_DGRAM", "absent", "never offered"),
    // ... and in 2.0.
    (v(2, 0), "const FI_PATH_MAX", "absent", "unused by rsverbs"),
    (v(2, 0), "const FI_VERSION_MAX", "absent", "unused by rsverbs"),
    (v(2, 0), "const FI_BUFFERED_RECV", "absent", "mode bit never required"),
    (v(2, 0), "const FI_DATATYPE_LAST", "14", "atomics check types by name, not by this bound"),
    (v(2, 0), "const FI_ATOMIC_OP_LAST", "19", "atomics check ops by name"),
    (v(2, 0), "const FI_LOG_MAX", "absent", "rsverbs' logging takes the levels by name"),
    (v(2, 0), "const FI_LOG_SUBSYS_MAX", "absent", "rsverbs' logging takes the subsystems by name"),
];

/// Lines that name the headers' own version, compared with the version itself.
const VERSION_LINES: &[&str] = &["const FI_MAJOR_VERSION", "const FI_MINOR_VERSION", "const FI_REVISION_VERSION"];

const fn v(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

struct Lists {
    /// The headers abi_layout.rs includes (its `HEADERS`).
    headers: Vec<String>,
    /// (C struct name, fields)
    structs: Vec<(String, Vec<String>)>,
    consts: Vec<String>,
}

/// The struct and constant lists of abi_layout.rs (its `abi_types!` and `abi_consts!`).
fn lists() -> Lists {
    let src = std::fs::read_to_string(root().join("tests/abi_layout.rs")).expect("read abi_layout.rs");
    let block = |name: &str| -> String {
        let start = src.find(&format!("\n{name}! {{")).unwrap_or_else(|| panic!("{name}! not found")) + name.len() + 4;
        let mut depth = 1;
        let mut end = start;
        for (i, c) in src[start..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = start + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        src[start..end].lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
    };
    let types = block("abi_types");
    let mut structs = Vec::new();
    let mut rest = types.as_str();
    while let Some(open) = rest.find('{') {
        let head = rest[..open].trim();
        let close = rest[open..].find('}').expect("closing brace") + open;
        let body = &rest[open + 1..close];
        rest = &rest[close + 1..];
        if head.contains('=') {
            continue; // an anonymous union spelled with __typeof__: covered through its parent's offset
        }
        let fields = body
            .split(',')
            .map(|f| f.trim())
            .filter(|f| !f.is_empty())
            .map(|f| if f == "type_" { "type".to_string() } else { f.to_string() })
            .collect();
        structs.push((head.to_string(), fields));
    }
    let h0 = src.find("const HEADERS: &[&str] = &[").expect("HEADERS in abi_layout.rs");
    let h1 = h0 + src[h0..].find("];").expect("end of HEADERS");
    let headers = src[h0..h1].split('"').skip(1).step_by(2).map(str::to_string).collect();
    let consts =
        block("abi_consts").split(',').map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
    Lists { headers, structs, consts }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compiles and runs the layout printer against `inc`, leaving out what `absent` names.
fn run(inc: &Path, l: &Lists, absent: &BTreeSet<String>, tag: &str) -> Result<Vec<String>, String> {
    let mut c = String::from("#include <stdio.h>\n#include <stddef.h>\n");
    for h in &l.headers {
        c += &format!("#include <rdma/{h}>\n");
    }
    c += "#pragma GCC diagnostic ignored \"-Wcpp\"\nint main(void) {\n";
    for (s, fields) in &l.structs {
        let key = format!("size {s}");
        if absent.contains(&key) {
            continue;
        }
        c += &format!("printf(\"size {s} %zu\\n\", sizeof(struct {s}));\n");
        for f in fields {
            let key = format!("off {s}.{f}");
            if !absent.contains(&key) {
                c += &format!("printf(\"off {s}.{f} %zu\\n\", offsetof(struct {s}, {f}));\n");
            }
        }
    }
    for k in &l.consts {
        if !absent.contains(&format!("const {k}")) {
            c += &format!("printf(\"const {k} %llu\\n\", (unsigned long long)({k}));\n");
        }
    }
    c += "return 0; }\n";
    let dir = std::env::temp_dir().join(format!("rsverbs-abi-versions-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, bin) = (dir.join("v.c"), dir.join("v"));
    std::fs::write(&src, c).unwrap();
    let o = Command::new("cc")
        .args(["-std=gnu11", "-w", "-I"])
        .arg(inc)
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("run cc");
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).to_string());
    }
    let o = Command::new(&bin).output().expect("run the layout printer");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect())
}

/// Runs against `inc`, learning from the compiler which names it lacks.
fn layout(inc: &Path, l: &Lists, tag: &str) -> BTreeMap<String, String> {
    let mut absent = BTreeSet::new();
    for _ in 0..20 {
        match run(inc, l, &absent, tag) {
            Ok(lines) => {
                let mut m: BTreeMap<String, String> = lines
                    .iter()
                    .filter_map(|x| x.rsplit_once(' ').map(|(k, v)| (k.to_string(), v.to_string())))
                    .collect();
                for a in absent {
                    m.insert(a, "absent".into());
                }
                return m;
            }
            Err(e) => {
                let before = absent.len();
                for line in e.replace(['\u{2018}', '\u{2019}'], "'").lines() {
                    // error: 'FI_X' undeclared ... / has no member named 'f' / storage size of ... struct S
                    if let Some(n) = quoted(line, "undeclared") {
                        absent.insert(format!("const {n}"));
                    } else if line.contains("has no member named") {
                        if let (Some(f), Some(s)) = (quoted(line, "has no member named"), struct_of(line)) {
                            absent.insert(format!("off {s}.{f}"));
                        }
                    } else if line.contains("invalid application of 'sizeof' to incomplete type") {
                        if let Some(s) = line.split("'struct ").nth(1).and_then(|x| x.split('\'').next()) {
                            absent.insert(format!("size {s}"));
                        }
                    }
                }
                assert!(absent.len() > before, "layout printer does not compile against {}:\n{e}", inc.display());
            }
        }
    }
    panic!("too many missing names in {}", inc.display());
}

fn quoted(line: &str, after: &str) -> Option<String> {
    let i = line.find(after)?;
    let s = if after == "undeclared" { &line[..i] } else { &line[i..] };
    let q: Vec<&str> = s.split('\'').collect();
    let n = if after == "undeclared" { q.get(q.len().saturating_sub(2))? } else { q.get(1)? };
    Some(n.to_string())
}

fn struct_of(line: &str) -> Option<String> {
    // "... 'struct fi_x' has no member named 'f'"
    let i = line.find("'struct ")?;
    Some(line[i + 8..].split('\'').next()?.to_string())
}

fn version_of(inc: &Path) -> u32 {
    let h = std::fs::read_to_string(inc.join("rdma/fabric.h")).expect("read fabric.h");
    let num = |name: &str| -> u32 {
        h.lines()
            .find_map(|l| l.strip_prefix(&format!("#define {name} ")).map(|r| r.trim().parse().unwrap()))
            .unwrap_or_else(|| panic!("{name} not in {}", inc.display()))
    };
    v(num("FI_MAJOR_VERSION"), num("FI_MINOR_VERSION"))
}

fn cores() -> Vec<PathBuf> {
    let cache = std::env::var("RSVERBS_CORES").unwrap_or_else(|_| "/opt/rsverbs/cores".into());
    let mut v: Vec<PathBuf> = std::fs::read_dir(&cache)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path().join("include")).filter(|p| p.join("rdma/fabric.h").exists()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn every_core_matches_the_mirrors_or_differs_as_known() {
    let l = lists();
    assert!(l.structs.len() > 40 && l.consts.len() > 200 && l.headers.len() > 10, "abi_layout.rs lists look short");
    let base = layout(Path::new("/usr/include"), &l, "base");
    assert_eq!(version_of(Path::new("/usr/include")), v(1, 17), "the baseline is Debian 12's 1.17");
    assert!(base.values().all(|x| x != "absent"), "1.17 lacks names of its own list");
    // The 1.17 baseline is the mirror (abi_layout.rs proves that); spot-check the link.
    assert_eq!(base["size fi_domain_attr"], std::mem::size_of::<abi::fi_domain_attr>().to_string());
    let dirs = cores();
    if dirs.is_empty() {
        // The test command builds 2.1.0 first (ci/test, ci/cores.sh); a bare `cargo test` may not.
        eprintln!("no other core's headers under $RSVERBS_CORES: only the 1.17 baseline was checked");
        return;
    }
    let mut problems = Vec::new();
    for inc in dirs {
        let ver = version_of(&inc);
        let got = layout(&inc, &l, &format!("{ver:x}"));
        let expected = |key: &str| -> Option<&'static str> {
            KNOWN.iter().filter(|(since, k, _, _)| *k == key && ver >= *since).map(|(_, _, val, _)| *val).last()
        };
        let mut seen = 0;
        assert_eq!(got["const FI_MAJOR_VERSION"], (ver >> 16).to_string());
        assert_eq!(got["const FI_MINOR_VERSION"], (ver & 0xffff).to_string());
        for (key, b) in &base {
            if VERSION_LINES.contains(&key.as_str()) {
                continue;
            }
            let g = got.get(key).map(String::as_str).unwrap_or("absent");
            match expected(key) {
                Some(e) => {
                    seen += 1;
                    if g != e {
                        problems.push(format!("{}.{}: {key}: {g}, expected {e} (1.17: {b})", ver >> 16, ver & 0xffff));
                    }
                }
                None if g != b => problems.push(format!("{}.{}: {key}: {g}, 1.17 has {b}: an unknown ABI change", ver >> 16, ver & 0xffff)),
                None => {}
            }
        }
        let want = KNOWN.iter().filter(|(s, k, _, _)| ver >= *s && base.contains_key(*k)).map(|(_, k, _, _)| *k).collect::<BTreeSet<_>>().len();
        assert_eq!(seen, want, "known differences not all checked for {ver:x}");
        // capi/version.rs agrees on fi_domain_attr's size in this core.
        let size: usize = got["size fi_domain_attr"].parse().unwrap();
        let rs = if ver >= v(2, 5) { 224 } else if ver >= v(2, 0) { 208 } else if ver >= v(1, 20) { 200 } else { 192 };
        assert_eq!(size, rs, "fi_domain_attr of {ver:x}");
        println!("{}.{}: {} lines compared, {} known differences", ver >> 16, ver & 0xffff, base.len(), seen);
    }
    assert!(problems.is_empty(), "ABI differences:\n{}", problems.join("\n"));
}
