#!/usr/bin/env bash
# shellcheck shell=bash
# Installation entries of the device suite (issue 24): rsverbs installed where
# libfabric looks (ci/install, and the .deb of ci/package through dpkg -i),
# used by unmodified programs with no FI_PROVIDER_PATH, then removed.
#
# Sourced by ci/guest/device-suite.sh (function suite_install), or run alone:
#   ci/lab.sh run ci/guest/install.sh OUTDIR
# Needs ci/build (target/prov) and, for the .deb entries, ci/package
# (target/packages/rsverbs_*.deb, or INSTALL_DEB=FILE).
#
# The guest's /usr, /etc and /var are tmpfs overlays over the host's (docs/lab.md):
# what is installed here never reaches the host. The entries still uninstall
# (and dpkg -r) whatever happens, and check that the system is as before.
#
#   install_ci              ci/install --no-build: the provider lands in the
#                           provider directory of Debian's libfabric
#                           (/usr/lib/x86_64-linux-gnu/libfabric)
#   install_fi_info         no FI_PROVIDER_PATH: fi_info -l lists verbs 1000.1,
#                           fi_info -p verbs -v names the build (nic driver:
#                           "rsverbs <rsverbs_version()>")
#   install_pingpong_msg    fi_pingpong -p verbs -e msg -c, no FI_PROVIDER_PATH,
#                           the installed librsverbs-fi.so loaded (LD_DEBUG=files)
#   install_pingpong_rdm    the same with -e rdm
#   install_uninstall       ci/install --uninstall: every file gone, the provider
#                           directory as before, fi_info -l shows the built-in
#                           verbs 117.0 again
#   install_deb             dpkg -i of the .deb: fi_info -l lists verbs 1000.1 and
#                           names the package's build, fi_pingpong -e msg -c runs
#                           on the packaged provider, dpkg -r leaves the built-in

suite_install() {
  local root="${LAB_ROOT:-$PWD}" rc out
  local prefix=/usr/local provdir=/usr/lib/x86_64-linux-gnu/libfabric
  # Nothing of the suite's own environment: what a user's shell has.
  local -a NOENV=(env -u FI_PROVIDER_PATH -u FI_PROVIDER -u FI_RSVERBS_NAME -u FI_VERBS_IFACE)
  local had_provdir=0
  [ -d "$provdir" ] && had_provdir=1
  lab_log "install: /usr is $(findmnt -no FSTYPE,SOURCE /usr 2>/dev/null | head -n 1) ($(findmnt -no FSTYPE /usr/lib 2>/dev/null | head -n 1) below)," \
    "/var $(findmnt -no FSTYPE /var 2>/dev/null | head -n 1); $provdir exists before: $had_provdir"

  # The build the installed files must name.
  local ident
  ident=$(python3 -c 'import ctypes,sys; f=ctypes.CDLL(sys.argv[1]).rsverbs_version; f.restype=ctypes.c_char_p; print(f().decode())' \
    "$root/target/prov/librsverbs-fi.so" 2>/dev/null) || ident=
  lab_log "install: rsverbs_version() of target/prov: '${ident:-<unreadable>}'"

  # verbs_version: the version fi_info -l (no environment) gives provider verbs.
  verbs_version() { "${NOENV[@]}" timeout 60 fi_info -l 2>/dev/null | awk '/^verbs:/ { getline; print $2; exit }'; }
  # loaded_from LOG: the librsverbs-fi.so a program loaded (LD_DEBUG=files lines).
  loaded_from() { sed -n 's/.*file=\([^ ]*librsverbs-fi\.so\) .*dynamically loaded by.*/\1/p' "$1" | sort -u | tr '\n' ' '; }
  # pp NAME EP: fi_pingpong -p verbs -e EP -c, default sizes, no environment;
  # the client under LD_DEBUG=files; passes only if it loaded $provdir's file.
  pp() {
    local name=$1 ep=$2 r
    PAIR_PORT=47592 run_pair "$name" \
      "${NOENV[*]} fi_pingpong -p verbs -e $ep -I 20 -c" \
      "${NOENV[*]} LD_DEBUG=files fi_pingpong -p verbs -e $ep -I 20 -c $LAB_IP" 300
    r=$?
    local from
    from=$(loaded_from "$LAB_OUT/$name.client.log")
    lab_log "$name: the client loaded: ${from:-no librsverbs-fi.so}"
    [ "$from" = "$provdir/librsverbs-fi.so " ] || { [ "$r" = 0 ] && r=1; }
    grep -E '^[0-9.]+[kmg]? ' "$LAB_OUT/$name.client.log" | head -n 8
    return "$r"
  }

  # ---- ci/install ----
  out="$LAB_OUT/install_ci.log"
  with_timeout 120 bash "$root/ci/install" --no-build --prefix "$prefix" >"$out" 2>&1
  rc=$?
  cat "$out"
  [ -f "$provdir/librsverbs-fi.so" ] || { echo "no $provdir/librsverbs-fi.so" >>"$out"; rc=1; }
  record install_ci "$rc"

  rc=0
  out="$LAB_OUT/install_fi_info.log"
  {
    echo "== fi_info -l (no environment)"; "${NOENV[@]}" timeout 60 fi_info -l
    echo "== fi_info -p verbs (no environment)"; "${NOENV[@]}" timeout 60 fi_info -p verbs
    echo "== fi_info -p verbs -v (no environment)"; "${NOENV[@]}" timeout 60 fi_info -p verbs -v
  } >"$out" 2>&1
  [ "$(verbs_version)" = 1000.1 ] || { echo "fi_info -l: verbs is not 1000.1" >>"$out"; rc=1; }
  grep -Eq '^[[:space:]]*provider:[[:space:]]*verbs[[:space:]]*$' "$out" || rc=1
  if [ -z "$ident" ] || ! grep -q "driver: rsverbs $ident\$" "$out"; then
    echo "fi_info -v does not name the build 'rsverbs $ident'" >>"$out"; rc=1
  fi
  grep -m1 'driver:' "$out"
  record install_fi_info "$rc"

  if [ -f "$provdir/librsverbs-fi.so" ]; then
    pp install_pingpong_msg msg; record install_pingpong_msg $?
    pp install_pingpong_rdm rdm; record install_pingpong_rdm $?
  else
    record install_pingpong_msg 1; record install_pingpong_rdm 1
  fi

  # ---- ci/install --uninstall (always, whatever happened above) ----
  out="$LAB_OUT/install_uninstall.log"
  with_timeout 120 bash "$root/ci/install" --uninstall --prefix "$prefix" >"$out" 2>&1
  rc=$?
  cat "$out"
  local f
  for f in "$provdir/librsverbs-fi.so" "$prefix/include/rsverbs.h" "$prefix/lib/pkgconfig/rsverbs.pc" \
           "$prefix/lib/rsverbs" "$prefix/share/rsverbs"; do
    [ -e "$f" ] && { echo "still there: $f" >>"$out"; rc=1; }
  done
  [ -d "$provdir" ] && [ "$had_provdir" = 0 ] && { echo "$provdir was left behind" >>"$out"; rc=1; }
  local v; v=$(verbs_version)
  echo "fi_info -l after uninstall: verbs $v" >>"$out"
  [ "$v" = 117.0 ] || { echo "the built-in verbs (117.0) is not back" >>"$out"; rc=1; }
  [ "$rc" = 0 ] || tail -n 5 "$out"
  record install_uninstall "$rc"

  # ---- the Debian package ----
  local deb="${INSTALL_DEB:-}"
  [ -n "$deb" ] || deb=$(ls -t "$root"/target/packages/rsverbs_*.deb 2>/dev/null | head -n 1)
  out="$LAB_OUT/install_deb.log"
  : >"$out"
  rc=0
  if [ -z "$deb" ] || [ ! -f "$deb" ]; then
    echo "no .deb (run ci/package first)" >>"$out"; rc=1
  else
    echo "== dpkg -i $deb" >>"$out"
    with_timeout 300 dpkg -i "$deb" >>"$out" 2>&1 || rc=1
    dpkg -L rsverbs >>"$out" 2>&1
    local pv; pv=$(dpkg-deb -f "$deb" Version)
    [ "$(dpkg-query -W -f='${Version}' rsverbs 2>/dev/null)" = "$pv" ] || { echo "rsverbs $pv not installed" >>"$out"; rc=1; }
    { echo "== fi_info -l"; "${NOENV[@]}" timeout 60 fi_info -l; echo "== fi_info -p verbs -v"; "${NOENV[@]}" timeout 60 fi_info -p verbs -v; } \
      >"$LAB_OUT/install_deb_fi_info.log" 2>&1
    cat "$LAB_OUT/install_deb_fi_info.log" >>"$out"
    [ "$(verbs_version)" = 1000.1 ] || { echo "fi_info -l: verbs is not 1000.1 with the package" >>"$out"; rc=1; }
    local dident
    dident=$(python3 -c 'import ctypes,sys; f=ctypes.CDLL(sys.argv[1]).rsverbs_version; f.restype=ctypes.c_char_p; print(f().decode())' \
      "$provdir/librsverbs-fi.so" 2>/dev/null)
    echo "packaged rsverbs_version(): $dident" >>"$out"
    { [ -n "$dident" ] && grep -q "driver: rsverbs $dident\$" "$LAB_OUT/install_deb_fi_info.log"; } ||
      { echo "fi_info -v does not name the packaged build" >>"$out"; rc=1; }
    pp install_deb_pingpong msg >>"$out" 2>&1 || { echo "fi_pingpong on the packaged provider failed" >>"$out"; rc=1; }
    echo "== dpkg -r rsverbs" >>"$out"
  fi
  # Always remove it (also after a failed or partial dpkg -i).
  if dpkg-query -W rsverbs >/dev/null 2>&1; then
    with_timeout 300 dpkg -r rsverbs >>"$out" 2>&1 || rc=1
    dpkg-query -W -f='${Status}\n' rsverbs 2>/dev/null | grep -q '^install ok installed' &&
      { echo "rsverbs still installed" >>"$out"; rc=1; }
    [ -e "$provdir/librsverbs-fi.so" ] && { echo "dpkg -r left $provdir/librsverbs-fi.so" >>"$out"; rc=1; }
    v=$(verbs_version)
    echo "fi_info -l after dpkg -r: verbs $v" >>"$out"
    [ "$v" = 117.0 ] || { echo "the built-in verbs (117.0) is not back" >>"$out"; rc=1; }
  fi
  [ "$rc" = 0 ] || tail -n 30 "$out"
  grep -E '^(fi_info -l after|packaged rsverbs_version)' "$out"
  record install_deb "$rc"
}

# Run alone: ci/lab.sh run ci/guest/install.sh OUTDIR
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -u
  . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
  : >"$LAB_OUT/results.txt"
  suite_install
  lab_summary
fi
