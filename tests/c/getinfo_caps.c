/*
 * getinfo_caps: the capability rules fabtests' fi_getinfo_test applies
 * (unit/getinfo_test.c of 1.17: caps1, caps2, caps3), one process, no fork.
 *
 *  - caps1: hints->caps = every combination of the primary caps rsverbs may
 *    offer (FI_MSG, FI_RMA, FI_TAGGED, FI_ATOMIC, FI_DIRECTED_RECV) and each
 *    other primary cap of fabtests' list on its own and with FI_MSG; for
 *    ep_type unspecified, FI_EP_MSG and FI_EP_RDM.  fi_getinfo returns
 *    -FI_ENODATA or infos in which every requested cap is in info->caps,
 *    the requested transmit caps are in tx_attr->caps and the requested
 *    receive caps in rx_attr->caps, and nothing else is where it does not
 *    belong: tx_attr->caps only transmit caps (primary + FI_SEND/FI_READ/
 *    FI_WRITE/FI_TRIGGER/FI_FENCE/FI_RMA_PMEM), rx_attr->caps only receive
 *    caps (primary + FI_RECV/FI_REMOTE_READ/FI_REMOTE_WRITE/FI_RMA_PMEM/
 *    FI_SOURCE/FI_SOURCE_ERR/FI_RMA_EVENT/FI_MULTI_RECV/FI_TRIGGER), both
 *    subsets of info->caps.  Before the fix rsverbs put the domain caps
 *    FI_LOCAL_COMM/FI_REMOTE_COMM into rx_attr->caps (fabtests: "fi_getinfo
 *    returned 5 - Input/output error").
 *  - caps2: the same "nothing extra" rules for hints without caps.
 *  - caps3: hints->domain_attr->caps = every combination of FI_LOCAL_COMM,
 *    FI_REMOTE_COMM, FI_SHARED_AV: -FI_ENODATA or domain_attr->caps holds
 *    them all (before the fix FI_SHARED_AV came back without the bit).
 *
 * Output: PASS getinfo_caps / FAIL getinfo_caps: <first failure>.
 */
#include "common.h"

#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#define PRIMARY_TX_CAPS (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST | FI_NAMED_RX_CTX | FI_HMEM | FI_COLLECTIVE)
#define PRIMARY_RX_CAPS (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_DIRECTED_RECV | FI_VARIABLE_MSG | FI_HMEM | FI_COLLECTIVE)
#define PRIMARY_CAPS (PRIMARY_TX_CAPS | PRIMARY_RX_CAPS)
#define DOMAIN_CAPS (FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV)
#define SEC_TX_CAPS (FI_TRIGGER | FI_FENCE | FI_RMA_PMEM)
#define SEC_RX_CAPS (FI_RMA_PMEM | FI_SOURCE | FI_SOURCE_ERR | FI_RMA_EVENT | FI_MULTI_RECV | FI_TRIGGER)
#define MOD_TX_CAPS (FI_SEND | FI_READ | FI_WRITE)
#define MOD_RX_CAPS (FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE)
#define OPT_TX_CAPS (MOD_TX_CAPS | SEC_TX_CAPS)
#define OPT_RX_CAPS (MOD_RX_CAPS | SEC_RX_CAPS)

/* the primary caps rsverbs offers somewhere (MSG or RDM) */
#define OFFERED (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_DIRECTED_RECV)

static const char *name = "getinfo_caps";
static int calls, infos, nodata;

static const char *caps_str(uint64_t c)
{
	static char b[4][1024];
	static int i;
	i = (i + 1) % 4;
	snprintf(b[i], sizeof(b[i]), "%s", fi_tostr(&c, FI_TYPE_CAPS));
	return b[i];
}

static const char *asked_prov(void)
{
	const char *prov = getenv("TEST_PROVIDER");
	return prov && *prov ? prov : "verbs";
}

/* Infos of a utility provider stacked on the one under test (verbs;ofi_rxm)
 * carry that provider's attributes, not ours: counted, not checked. */
static int layered;
static bool ours(const struct fi_info *fi)
{
	if (!strcasecmp(fi->fabric_attr->prov_name, asked_prov()))
		return true;
	layered++;
	return false;
}

static struct fi_info *base_hints(enum fi_ep_type type)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		fail("fi_allocinfo returned NULL");
	h->fabric_attr->prov_name = strdup(asked_prov());
	h->ep_attr->type = type;
	/* as fi_getinfo_test: every mode bit accepted, fabtests' mr_mode */
	h->mode = ~0ULL;
	h->domain_attr->mr_mode = MR_MODE_117;
	return h;
}

/* fabtests' check_no_extra_caps (the tx ⊆ info->caps rule made fatal too) */
static void no_extra_caps(const struct fi_info *fi, uint64_t asked, const char *what)
{
	const char *p = fi->fabric_attr->prov_name;
	uint64_t tx = fi->tx_attr->caps, rx = fi->rx_attr->caps;
	EXPECT(!(asked & (fi->caps & ~(asked | DOMAIN_CAPS | OPT_TX_CAPS | OPT_RX_CAPS))),
	       "%s: %s: info->caps [%s]", what, p, caps_str(fi->caps));
	EXPECT(!(tx & ~(PRIMARY_TX_CAPS | OPT_TX_CAPS)),
	       "%s: %s ep_type %d: tx_attr->caps has caps that are not transmit caps: [%s]", what, p,
	       fi->ep_attr->type, caps_str(tx & ~(PRIMARY_TX_CAPS | OPT_TX_CAPS)));
	EXPECT(!(tx & ~fi->caps), "%s: %s ep_type %d: tx_attr->caps [%s] not in info->caps [%s]", what,
	       p, fi->ep_attr->type, caps_str(tx), caps_str(fi->caps));
	EXPECT(!(rx & ~(PRIMARY_RX_CAPS | OPT_RX_CAPS)),
	       "%s: %s ep_type %d: rx_attr->caps has caps that are not receive caps: [%s]", what, p,
	       fi->ep_attr->type, caps_str(rx & ~(PRIMARY_RX_CAPS | OPT_RX_CAPS)));
	EXPECT(!(rx & ~fi->caps), "%s: %s ep_type %d: rx_attr->caps [%s] not in info->caps [%s]", what,
	       p, fi->ep_attr->type, caps_str(rx), caps_str(fi->caps));
}

/* fabtests' check_caps */
static void has_caps(const struct fi_info *fi, uint64_t asked, const char *what)
{
	no_extra_caps(fi, asked, what);
	if (!asked)
		return;
	EXPECT((fi->caps & asked) == asked, "%s: info->caps [%s] lacks [%s]", what, caps_str(fi->caps),
	       caps_str(asked & ~fi->caps));
	uint64_t t = asked & PRIMARY_TX_CAPS, r = asked & PRIMARY_RX_CAPS;
	EXPECT((fi->tx_attr->caps & t) == t, "%s: tx_attr->caps [%s] lacks [%s]", what,
	       caps_str(fi->tx_attr->caps), caps_str(t & ~fi->tx_attr->caps));
	EXPECT((fi->rx_attr->caps & r) == r, "%s: rx_attr->caps [%s] lacks [%s]", what,
	       caps_str(fi->rx_attr->caps), caps_str(r & ~fi->rx_attr->caps));
}

/* One fi_getinfo; -FI_ENODATA is "nothing matches"; any other error fails. */
static struct fi_info *get(struct fi_info *h, const char *what)
{
	struct fi_info *out = NULL;
	calls++;
	int r = fi_getinfo(API_VERSION, NULL, NULL, 0, h, &out);
	if (r == -FI_ENODATA) {
		nodata++;
		return NULL;
	}
	EXPECT(r == 0, "%s: fi_getinfo returned %d (%s)", what, r, fi_strerror(-r));
	return out;
}

static void caps1(enum fi_ep_type type, uint64_t caps)
{
	char what[256];
	snprintf(what, sizeof(what), "caps1 ep_type %d hints->caps [%s]", type, caps_str(caps));
	struct fi_info *h = base_hints(type);
	h->caps = caps;
	struct fi_info *out = get(h, what);
	for (struct fi_info *fi = out; fi; fi = fi->next) {
		if (!ours(fi))
			continue;
		has_caps(fi, caps, what);
		infos++;
	}
	fi_freeinfo(out);
	fi_freeinfo(h);
}

int main(void)
{
	test_name = name;
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(TEST_ALARM_SECS);
	enum fi_ep_type types[] = { FI_EP_UNSPEC, FI_EP_MSG, FI_EP_RDM };

	/* caps1 */
	uint64_t bits[64];
	int nb = 0;
	for (int i = 0; i < 64; i++)
		if (OFFERED & (1ULL << i))
			bits[nb++] = 1ULL << i;
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		for (uint64_t m = 0; m < (1ULL << nb); m++) {
			uint64_t caps = 0;
			for (int i = 0; i < nb; i++)
				if (m & (1ULL << i))
					caps |= bits[i];
			caps1(types[t], caps);
		}
		for (int i = 0; i < 64; i++) {
			uint64_t c = 1ULL << i;
			if (!(PRIMARY_CAPS & c) || (OFFERED & c))
				continue;
			caps1(types[t], c);
			caps1(types[t], c | FI_MSG);
		}
	}
	int infos1 = infos;
	EXPECT(infos1 > 0, "caps1: no combination gave an info");
	logmsg("caps1: %d fi_getinfo calls, %d infos checked, %d -FI_ENODATA", calls, infos1, nodata);

	/* caps2: hints without caps (fabtests passes NULL hints; the provider
	 * name keeps the check to the provider under test) */
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		struct fi_info *h = base_hints(types[t]);
		h->mode = 0;
		h->domain_attr->mr_mode = 0;
		struct fi_info *out = get(h, "caps2");
		int n = 0;
		for (struct fi_info *fi = out; fi; fi = fi->next) {
			if (!ours(fi))
				continue;
			no_extra_caps(fi, 0, "caps2");
			n++;
		}
		if (types[t] != FI_EP_UNSPEC || n)
			logmsg("caps2: ep_type %d: %d infos checked", types[t], n);
		fi_freeinfo(out);
		fi_freeinfo(h);
	}

	/* caps3 */
	const uint64_t dcaps[] = { FI_LOCAL_COMM, FI_REMOTE_COMM, FI_SHARED_AV };
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		for (unsigned m = 0; m < 8; m++) {
			uint64_t want = 0;
			for (int i = 0; i < 3; i++)
				if (m & (1u << i))
					want |= dcaps[i];
			char what[256];
			snprintf(what, sizeof(what), "caps3 ep_type %d domain_attr->caps [%s]", types[t],
				 caps_str(want));
			struct fi_info *h = base_hints(types[t]);
			h->domain_attr->caps = want;
			struct fi_info *out = get(h, what);
			int n = 0;
			for (struct fi_info *fi = out; fi; fi = fi->next, n++)
				EXPECT(!ours(fi) || (fi->domain_attr->caps & want) == want,
				       "%s: an info's domain_attr->caps [%s] lacks [%s] (-FI_ENODATA expected then)",
				       what, caps_str(fi->domain_attr->caps),
				       caps_str(want & ~fi->domain_attr->caps));
			logmsg("%s: %s", what, out ? "infos with all of them" : "-FI_ENODATA");
			if (m == 0)
				EXPECT(out != NULL, "%s: no info without domain caps", what);
			fi_freeinfo(out);
			fi_freeinfo(h);
		}
	}
	logmsg("infos of providers layered on %s (not checked): %d", asked_prov(), layered);
	printf("PASS %s\n", name);
	return 0;
}
