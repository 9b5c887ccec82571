use super::*;

#[test]
fn prov_names() {
    assert_eq!(classify_prov_name(None, "verbs"), ProvRequest::Ours);
    assert_eq!(classify_prov_name(Some("VERBS"), "verbs"), ProvRequest::Ours);
    assert_eq!(classify_prov_name(Some("verbs;ofi_rxm"), "verbs"), ProvRequest::OursRxm);
    assert_eq!(classify_prov_name(Some("verbs;ofi_rxd"), "verbs"), ProvRequest::Other);
    assert_eq!(classify_prov_name(Some("tcp"), "verbs"), ProvRequest::Other);
    assert_eq!(classify_prov_name(Some("tcp;ofi_rxm"), "verbs"), ProvRequest::Other);
}

#[test]
fn fi_provider_filter() {
    assert!(provider_filter_allows(None, "verbs"));
    assert!(provider_filter_allows(Some(""), "verbs"));
    assert!(provider_filter_allows(Some("verbs"), "verbs"));
    assert!(provider_filter_allows(Some("tcp,verbs"), "verbs"));
    assert!(provider_filter_allows(Some("verbs;ofi_rxm"), "verbs"));
    assert!(!provider_filter_allows(Some("tcp"), "verbs"));
    assert!(!provider_filter_allows(Some("^verbs"), "verbs"));
    assert!(provider_filter_allows(Some("^tcp,udp"), "verbs"));
}

#[test]
fn param_env_names() {
    assert_eq!(env_name(Some("verbs"), "iface"), "FI_VERBS_IFACE");
    assert_eq!(env_name(None, "log_level"), "FI_LOG_LEVEL");
}

#[test]
fn old_abi_sizes_are_prefixes() {
    assert_eq!(ABI_1_0.tx, 72);
    assert_eq!(ABI_1_0.fabric, 28);
    assert!(ABI_1_0.domain < ABI_1_1.domain && ABI_1_1.domain < size_of::<fi_domain_attr>());
    assert_eq!(ABI_1_2.info, size_of::<fi_info>());
}

#[test]
fn strerror_texts() {
    // SAFETY: fi_strerror returns C strings.
    let s = |e| unsafe { CStr::from_ptr(core_strerror(e)) }.to_str().unwrap().to_string();
    assert_eq!(s(-FI_ETRUNC), "Truncation error");
    assert_eq!(s(FI_EOTHER), "Unspecified error");
    assert_eq!(s(9999), "Unspecified error");
    assert_eq!(s(-22), "Invalid argument");
}
