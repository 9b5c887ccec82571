use super::*;

fn req(version: u32, hints: Option<Info>) -> Request {
    Request { version, hints, ..Default::default() }
}

#[test]
fn mr_mode_new_api() {
    let mut h = Info::default();
    h.domain.mr_mode = MR_MODE;
    assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG | FI_RMA, false), Ok((MR_MODE, 0)));
    // An app that can't do local MRs gets nothing.
    h.domain.mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
    assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG, false), Err(FiError::NODATA));
    // MSG-only apps need just FI_MR_LOCAL.
    h.domain.mr_mode = FI_MR_LOCAL;
    assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG, false), Ok((FI_MR_LOCAL, 0)));
    assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG | FI_RMA, false), Err(FiError::NODATA));
    h.domain.mr_mode = FI_MR_SCALABLE;
    assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG, false), Err(FiError::NODATA));
}

#[test]
fn mr_mode_rdm_without_local() {
    let mut h = Info::default();
    let remote = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
    // RDM serves hints without FI_MR_LOCAL, and answers without it.
    h.domain.mr_mode = remote;
    assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG | FI_RMA, true), Ok((remote, 0)));
    assert_eq!(match_mr_mode(FI_VERSION(2, 0), Some(&h), FI_TAGGED, true), Ok((0, 0)));
    // RMA keys still need the remote bits.
    h.domain.mr_mode = FI_MR_VIRT_ADDR;
    assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG | FI_RMA, true), Err(FiError::NODATA));
    // With FI_MR_LOCAL in the hints the answer keeps it (descriptors as before).
    h.domain.mr_mode = MR_MODE;
    assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG | FI_RMA, true), Ok((MR_MODE, 0)));
    // No hints: unchanged.
    assert_eq!(match_mr_mode(FI_VERSION(1, 17), None, FI_MSG | FI_RMA, true), Ok((MR_MODE, 0)));
}

#[test]
fn mr_mode_old_api_needs_local_mr_mode_bit() {
    let mut h = Info::default();
    h.mode = FI_CONTEXT | FI_LOCAL_MR;
    assert_eq!(match_mr_mode(FI_VERSION(1, 4), Some(&h), FI_MSG, false), Ok((FI_MR_BASIC, FI_LOCAL_MR)));
    h.mode = FI_CONTEXT;
    assert_eq!(match_mr_mode(FI_VERSION(1, 4), Some(&h), FI_MSG, false), Err(FiError::NODATA));
    assert_eq!(match_mr_mode(FI_VERSION(1, 4), None, FI_MSG, false), Ok((FI_MR_BASIC, FI_LOCAL_MR)));
}

#[test]
fn ports_parse() {
    assert_eq!(parse_port(Some("47592")), Ok(Some(47592)));
    assert_eq!(parse_port(None), Ok(None));
    assert_eq!(parse_port(Some("http")), Err(FiError::NODATA));
    assert_eq!(parse_port(Some("70000")), Err(FiError::NODATA));
}

#[test]
fn numeric_host_flag_refuses_names() {
    assert!(resolve_node("10.1.2.3", 7, true).is_ok());
    assert_eq!(resolve_node("localhost", 7, true), Err(FiError::NODATA));
    assert_eq!(resolve_node("::1", 7, true).unwrap(), "[::1]:7".parse().unwrap());
}

#[test]
fn unknown_api_version_is_enosys() {
    assert_eq!(getinfo(&req(FI_VERSION(3, 0), None)).unwrap_err(), FiError::NOSYS);
    assert_eq!(getinfo(&req(API_VERSION_MAX + 1, None)).unwrap_err(), FiError::NOSYS);
    assert_eq!(getinfo(&req(FI_VERSION(0, 9), None)).unwrap_err(), FiError::NOSYS);
}

#[test]
fn directed_receives_by_2x_caps() {
    assert!(directed_recv(FI_DIRECTED_RECV, false) && directed_recv(FI_DIRECTED_RECV, true));
    assert!(directed_recv(FI_TAGGED_DIRECTED_RECV, true) && !directed_recv(FI_TAGGED_DIRECTED_RECV, false));
    assert!(directed_recv(FI_EXACT_DIRECTED_RECV, true) && directed_recv(FI_EXACT_DIRECTED_RECV, false));
    let tagged_exact = FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV;
    assert!(directed_recv(tagged_exact, true) && !directed_recv(tagged_exact, false));
    assert!(!directed_recv(FI_TAGGED | FI_MSG, true));
}

#[test]
fn caps_of_2x_only_for_2x_applications() {
    // Bits 45/48 mean FI_HMEM_HOST_ALLOC / FI_VARIABLE_MSG in 1.x: no caps there.
    assert_eq!(rdm_caps_for(FI_VERSION(1, 22)) & (FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV), 0);
    let v2 = rdm_caps_for(FI_VERSION(2, 0));
    assert_eq!(v2 & (FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV), FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV);
    assert_eq!(v2 & FI_TAGGED_MULTI_RECV, 0);
}

#[test]
fn newer_domain_hints() {
    let mut d = DomainAttr::default();
    assert!(check_newer_domain_hints(&d).is_ok());
    d.max_cntr_value = u64::MAX;
    d.max_err_cntr_value = 1 << 40;
    assert!(check_newer_domain_hints(&d).is_ok());
    d.max_group_id = 1;
    assert_eq!(check_newer_domain_hints(&d).unwrap_err(), FiError::NODATA);
    d.max_group_id = 0;
    d.max_ep_auth_key = 1;
    assert_eq!(check_newer_domain_hints(&d).unwrap_err(), FiError::NODATA);
}

#[test]
fn control_unified_progress_is_2x_control_only() {
    assert_eq!(progress(FI_VERSION(2, 0), FI_PROGRESS_CONTROL_UNIFIED, FI_PROGRESS_MANUAL, "control").unwrap(), FI_PROGRESS_CONTROL_UNIFIED);
    assert_eq!(progress(FI_VERSION(2, 0), FI_PROGRESS_CONTROL_UNIFIED, FI_PROGRESS_AUTO, "data").unwrap_err(), FiError::NODATA);
    assert_eq!(progress(FI_VERSION(1, 17), FI_PROGRESS_CONTROL_UNIFIED, FI_PROGRESS_MANUAL, "control").unwrap_err(), FiError::NODATA);
}

#[test]
fn other_provider_name_is_enodata() {
    let mut h = Info::default();
    h.fabric.prov_name = Some("tcp".into());
    assert_eq!(getinfo(&req(API_VERSION, Some(h))).unwrap_err(), FiError::NODATA);
}
