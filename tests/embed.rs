//! Host tests of the drop-in / embedded use (no RDMA device needed):
//! * rsverbs exports libfabric 1.17's core API with libfabric's symbol versions;
//! * `fi_tostr`/`fi_tostr_r`/`fi_strerror`/`fi_dupinfo` give byte-for-byte what the
//!   real libfabric gives (tests/embed/tostr_cmp.c loads both);
//! * include/rsverbs.h compiles cleanly as C99 and C++; the example links
//!   against rsverbs alone;
//! * Debian's unmodified fi_info runs on the drop-in directory and lists only
//!   rsverbs, without loading the system libfabric;
//! * loaded as a provider by the real core, rsverbs (with these exports) still
//!   registers once and its calls stay inside it.
//! The lab (ci/guest/embed.sh) runs fi_pingpong and the example on Soft-RoCE.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SYSTEM_LIBFABRIC: &str = "/usr/lib/x86_64-linux-gnu/libfabric.so.1";
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn built_lib() -> PathBuf {
    // target/<profile>/deps/embed-xxxx -> target/<profile>/librsverbs.so
    let exe = std::env::current_exe().expect("test exe path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let so = dir.join("librsverbs.so");
    let release = dir.file_name().is_some_and(|n| n == "release");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "--lib"]).current_dir(ROOT);
    if release {
        cmd.arg("--release");
    }
    assert!(cmd.status().expect("run cargo build --lib").success(), "cargo build --lib failed");
    assert!(so.exists(), "{} was not built", so.display());
    so
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rsverbs-embed-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn cc(args: &[&str]) -> Output {
    Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("run {}: {e}", args[0]))
}

/// (version, name) of every defined dynamic symbol, from `objdump -T`.
fn exports(lib: &Path) -> Vec<(String, String)> {
    let o = Command::new("objdump").arg("-T").arg(lib).output().expect("run objdump (binutils)");
    assert!(o.status.success());
    let mut v: Vec<(String, String)> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.contains(" DF ") && !l.contains("*UND*"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = f.len();
            (n >= 2).then(|| (f[n - 2].to_string(), f[n - 1].to_string()))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn exports_libfabric_core_api_with_its_symbol_versions() {
    let ours = exports(&built_lib());
    let theirs = exports(Path::new(SYSTEM_LIBFABRIC));
    assert!(theirs.len() >= 20, "system libfabric lists too few symbols: {theirs:?}");
    // Every (version, name) of libfabric 1.17, hidden or default: 1.17's defaults
    // FABRIC_1.3 fi_getinfo/fi_dupinfo/fi_freeinfo are hidden versions here, as in
    // libfabric 2.5+, whose defaults (FABRIC_1.9) and additions rsverbs also exports.
    let bare = |v: &str| v.trim_matches(|c| c == '(' || c == ')').to_string();
    let ours_bare: Vec<(String, String)> = ours.iter().map(|(v, n)| (bare(v), n.clone())).collect();
    for s in &theirs {
        assert!(ours_bare.contains(&(bare(&s.0), s.1.clone())), "rsverbs lacks {} {} (it exports {ours:?})", s.0, s.1);
    }
    // libfabric 2.6's (libfabric.map.in): FABRIC_1.7 to 1.9.
    let v26: &[(&str, &str)] = &[
        ("(FABRIC_1.7)", "fi_getinfo"),
        ("(FABRIC_1.7)", "fi_dupinfo"),
        ("(FABRIC_1.7)", "fi_freeinfo"),
        ("(FABRIC_1.8)", "fi_getinfo"),
        ("(FABRIC_1.8)", "fi_dupinfo"),
        ("(FABRIC_1.8)", "fi_freeinfo"),
        ("FABRIC_1.8", "fi_fabric2"),
        ("FABRIC_1.9", "fi_getinfo"),
        ("FABRIC_1.9", "fi_dupinfo"),
        ("FABRIC_1.9", "fi_freeinfo"),
    ];
    for (v, n) in v26 {
        assert!(ours.contains(&(v.to_string(), n.to_string())), "rsverbs lacks 2.6's {v} {n} (it exports {ours:?})");
    }
    assert!(ours.iter().any(|(_, n)| n == "fi_prov_ini"), "fi_prov_ini missing");
    // Only libfabric's names, fi_prov_ini and rsverbs_* are exported.
    for (v, n) in &ours {
        assert!(
            ours_bare.iter().any(|_| theirs.iter().any(|t| bare(&t.0) == bare(v) && &t.1 == n))
                || v26.iter().any(|(tv, tn)| *tv == v.as_str() && *tn == n.as_str())
                || n == "fi_prov_ini"
                || n.starts_with("rsverbs_"),
            "unexpected export {v} {n}"
        );
    }
}

#[test]
fn bound_symbolically() {
    let o = Command::new("readelf").arg("-d").arg(built_lib()).output().expect("run readelf");
    let t = text(&o);
    assert!(t.contains("SYMBOLIC"), "no DT_SYMBOLIC / DF_SYMBOLIC flag:\n{t}");
}

#[test]
fn tostr_strerror_dupinfo_match_libfabric() {
    let lib = built_lib();
    let tmp = tmpdir("tostr");
    let bin = tmp.join("tostr_cmp");
    let src = format!("{ROOT}/tests/embed/tostr_cmp.c");
    let o = cc(&["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o", bin.to_str().unwrap(), &src, "-ldl"]);
    assert!(o.status.success(), "compile failed:\n{}", text(&o));
    let o = Command::new(&bin).arg(SYSTEM_LIBFABRIC).arg(&lib).env_remove("FI_PROVIDER").output().unwrap();
    let t = text(&o);
    println!("{t}");
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(o.status.success(), "fi_tostr differs from libfabric's:\n{t}");
    let last = t.lines().last().unwrap_or_default();
    assert!(last.ends_with(" passed, 0 failed") && !last.starts_with("0 "), "bad summary: {last}");
}

#[test]
fn header_compiles_as_c99_and_cxx() {
    let tmp = tmpdir("hdr");
    let c = tmp.join("h.c");
    std::fs::write(
        &c,
        "#include <rdma/fabric.h>\n#include <rsverbs.h>\n\
         int main(void) { struct rsverbs_stats s; s.size = sizeof(s);\n\
         return rsverbs_stats(&s) + (int) rsverbs_api_version() + (rsverbs_provider() != 0) + rsverbs_mode()\n\
         + (rsverbs_version()[0] != 0) + (int) rsverbs_prov_version() + (rsverbs_prov_name()[0] != 0); }\n",
    )
    .unwrap();
    let cpp = tmp.join("h.cpp");
    std::fs::copy(&c, &cpp).unwrap();
    let inc = format!("-I{ROOT}/include");
    for args in [
        vec!["cc", "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", &inc, "-fsyntax-only", c.to_str().unwrap()],
        vec!["c++", "-std=c++11", "-Wall", "-Wextra", "-Werror", &inc, "-fsyntax-only", cpp.to_str().unwrap()],
    ] {
        let o = cc(&args);
        assert!(o.status.success(), "{args:?} failed:\n{}", text(&o));
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn header_is_up_to_date_with_cbindgen() {
    // build.rs regenerates it; a committed header that differs means someone edited it by hand.
    built_lib();
    let h = std::fs::read_to_string(format!("{ROOT}/include/rsverbs.h")).unwrap();
    assert!(h.contains("Generated by cbindgen"), "include/rsverbs.h not generated");
    for f in ["rsverbs_version", "rsverbs_prov_version", "rsverbs_api_version", "rsverbs_provider", "rsverbs_mode", "rsverbs_stats"] {
        assert!(h.contains(&format!("{f}(")), "{f} missing from the header");
    }
}

#[test]
fn example_links_against_rsverbs_only() {
    let lib = built_lib();
    let tmp = tmpdir("ex");
    let libdir = tmp.join("lib");
    std::fs::create_dir_all(&libdir).unwrap();
    std::fs::copy(&lib, libdir.join("librsverbs-fi.so")).unwrap();
    let bin = tmp.join("embed_rdm");
    let inc = format!("-I{ROOT}/include");
    let l = format!("-L{}", libdir.display());
    let o = cc(&[
        "cc",
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-Werror",
        &inc,
        "-o",
        bin.to_str().unwrap(),
        &format!("{ROOT}/examples/embed_rdm.c"),
        &l,
        "-l:librsverbs-fi.so",
    ]);
    assert!(o.status.success(), "example does not build:\n{}", text(&o));
    let o = Command::new("readelf").arg("-d").arg(&bin).output().unwrap();
    let t = text(&o);
    assert!(t.contains("librsverbs-fi.so"), "example does not need librsverbs-fi.so:\n{t}");
    assert!(!t.contains("libfabric"), "example needs libfabric:\n{t}");
    // Its libfabric symbols are versioned as libfabric's (so it also runs on libfabric.so.1).
    let o = Command::new("objdump").arg("-T").arg(&bin).output().unwrap();
    let t = text(&o);
    assert!(t.contains("(FABRIC_1.3) fi_getinfo"), "fi_getinfo not bound to FABRIC_1.3:\n{t}");
    let _ = std::fs::remove_dir_all(&tmp);
}

/// A drop-in directory: libfabric.so.1 -> the built library.
fn dropin(tag: &str) -> PathBuf {
    let tmp = tmpdir(tag);
    let d = tmp.join("dropin");
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::symlink(built_lib(), d.join("libfabric.so.1")).unwrap();
    d
}

#[test]
fn dropin_fi_info_lists_only_rsverbs() {
    let d = dropin("fi_info");
    let run = |args: &[&str], debug: Option<&str>| {
        let mut c = Command::new("/usr/bin/fi_info");
        c.args(args).env("LD_LIBRARY_PATH", &d).env_remove("FI_PROVIDER").env_remove("FI_PROVIDER_PATH").env_remove("FI_RSVERBS_NAME");
        if let Some(dbg) = debug {
            c.env("LD_DEBUG", dbg);
        }
        c.output().expect("run /usr/bin/fi_info (libfabric-bin)")
    };
    let o = run(&["-l"], Some("libs"));
    let t = text(&o);
    assert!(o.status.success(), "fi_info -l failed:\n{t}");
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(out, "verbs:\n    version: 1000.1\n", "fi_info -l should list rsverbs alone");
    assert!(!t.contains("/lib/x86_64-linux-gnu/libfabric.so"), "the system libfabric was loaded:\n{t}");
    assert!(t.contains(&format!("{}/libfabric.so.1", d.display())), "the drop-in was not loaded:\n{t}");
    // --version goes through fi_tostr(FI_TYPE_VERSION).
    let o = run(&["--version"], None);
    let t = text(&o);
    assert!(o.status.success() && t.contains("libfabric: 2.6.0-rsverbs-"), "fi_info --version:\n{t}");
    // Other providers resolve to nothing; verbs;ofi_rxm resolves.
    let o = run(&["-l", "-p", "tcp"], None);
    assert!(!o.status.success(), "fi_info -p tcp should find nothing:\n{}", text(&o));
    let o = run(&["-l", "-p", "verbs;ofi_rxm"], None);
    let t = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success() && t.starts_with("verbs;ofi_rxm:\n"), "fi_info -l -p 'verbs;ofi_rxm':\n{}", text(&o));
    let _ = std::fs::remove_dir_all(d.parent().unwrap());
}

#[test]
fn provider_under_real_core_still_registers_once_and_binds_internally() {
    let lib = built_lib();
    let tmp = tmpdir("prov");
    let prov = tmp.join("prov");
    std::fs::create_dir_all(&prov).unwrap();
    let so = prov.join("librsverbs-fi.so");
    std::fs::copy(&lib, &so).unwrap();
    let o = Command::new("/usr/bin/fi_info")
        .arg("-l")
        .env("FI_PROVIDER_PATH", &prov)
        .env("FI_RSVERBS_NAME", "rsverbs")
        .env("LD_DEBUG", "bindings")
        .env_remove("FI_PROVIDER")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("run fi_info");
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "fi_info -l failed:\n{out}{err}");
    assert_eq!(out.matches("rsverbs:\n    version: 1000.1\n").count(), 1, "rsverbs listed not exactly once:\n{out}");
    // The core's own providers are listed beside it (the built-in verbs too, where a
    // device exists: the lab checks that).
    assert!(out.contains("tcp:\n    version: 117.0\n"), "built-in providers missing beside rsverbs:\n{out}");
    let so = so.to_str().unwrap();
    for l in err.lines().filter(|l| l.contains("binding file")) {
        // rsverbs never binds to the core's fi_* and the core/app never bind to rsverbs' fi_*.
        // Except the one probe of the loading core's version at fi_prov_ini
        // (capi/version.rs): fi_version@FABRIC_1.0 of the core.
        let sym_fi = l.contains("symbol `fi_") && !l.contains("symbol `fi_version' [FABRIC_1.0]");
        assert!(!(sym_fi && l.contains(&format!("binding file {so}")) && l.contains("libfabric.so.1")), "rsverbs bound to the core: {l}");
        assert!(!(sym_fi && !l.contains("fi_prov_ini") && l.contains(&format!("to {so}"))), "something bound to rsverbs' copy: {l}");
    }
    assert!(err.contains(&format!("to {so} [0]: normal symbol `fi_prov_ini'")), "fi_prov_ini not looked up in rsverbs:\n{err}");
    // rsverbs learnt the loading core's version from the core itself, not from
    // its own drop-in fi_version (which a -Bsymbolic RTLD_DEFAULT lookup finds).
    let o = Command::new("/usr/bin/fi_info")
        .arg("-l")
        .env("FI_PROVIDER_PATH", &prov)
        .env("FI_RSVERBS_NAME", "rsverbs")
        .env("FI_LOG_LEVEL", "info")
        .env_remove("FI_PROVIDER")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("run fi_info");
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(err.contains("loaded by libfabric core 1.17"), "rsverbs did not see the 1.17 core:\n{err}");
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn version_names_the_commit_of_the_build() {
    use rsverbs::capi::embed::{rsverbs_commit, rsverbs_version};
    // SAFETY: both return static NUL-terminated strings.
    let (v, c) = unsafe {
        (
            std::ffi::CStr::from_ptr(rsverbs_version()).to_str().unwrap().to_string(),
            std::ffi::CStr::from_ptr(rsverbs_commit()).to_str().unwrap().to_string(),
        )
    };
    assert_eq!(v, format!("{}+{c}", env!("CARGO_PKG_VERSION")), "rsverbs_version() is not <version>+<commit>");
    assert_eq!(rsverbs::tostr::version_string(), format!("2.6.0-rsverbs-{v}"));
    assert!(rsverbs::capi::nic::driver().ends_with(&v), "the nic's driver does not name the build");
    if std::env::var("RSVERBS_COMMIT").is_ok_and(|s| !s.trim().is_empty()) {
        return;
    }
    // Built from this git tree: the library names the commit HEAD is at.
    let o = Command::new("git").args(["-C", ROOT, "rev-parse", "--short=12", "HEAD"]).output().expect("git");
    if o.status.success() {
        let head = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert!(c == head || c == format!("{head}-dirty"), "built from {c}, HEAD is {head}");
    } else {
        assert_eq!(c, "unknown");
    }
}
