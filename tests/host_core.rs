//! Drives rsverbs through the real libfabric core on the build host: compiles
//! tests/host/core_load.c against the system <rdma/fabric.h>, points
//! FI_PROVIDER_PATH at the freshly built provider and runs it. Needs no RDMA
//! device (it checks the device-less paths); the lab suite does the rest.

use std::path::PathBuf;
use std::process::Command;

fn built_provider() -> PathBuf {
    // target/<profile>/deps/host_core-xxxx -> target/<profile>/librsverbs.so
    let exe = std::env::current_exe().expect("test exe path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let so = dir.join("librsverbs.so");
    // `cargo test` does not build the cdylib for integration tests: build it
    // (same profile) when it is missing.
    let release = dir.file_name().is_some_and(|n| n == "release");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "--lib"]).current_dir(env!("CARGO_MANIFEST_DIR"));
    if release {
        cmd.arg("--release");
    }
    let st = cmd.status().expect("run cargo build --lib");
    assert!(st.success(), "cargo build --lib failed");
    assert!(so.exists(), "{} was not built", so.display());
    so
}

#[test]
fn provider_loads_under_libfabric_core() {
    let tmp = std::env::temp_dir().join(format!("rsverbs-host-core-{}", std::process::id()));
    let prov = tmp.join("prov");
    std::fs::create_dir_all(&prov).unwrap();
    std::fs::copy(built_provider(), prov.join("librsverbs-fi.so")).unwrap();
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/host/core_load.c");
    let bin = tmp.join("core_load");
    let cc = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&bin)
        .arg(src)
        .arg("-lfabric")
        .output()
        .expect("run cc (install gcc and libfabric-dev)");
    assert!(cc.status.success(), "compile failed:\n{}", String::from_utf8_lossy(&cc.stderr));
    let out = Command::new(&bin)
        .env("FI_PROVIDER_PATH", &prov)
        .env_remove("FI_PROVIDER")
        .env_remove("FI_RSVERBS_NAME")
        .output()
        .expect("run core_load");
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(out.status.success(), "core_load reported failures:\n{text}");
    assert!(text.contains(" passed, 0 failed"), "no summary line:\n{text}");
}
