/* Loads rsverbs through the real libfabric core (FI_PROVIDER_PATH) on a host
 * that may have no RDMA device, and checks what must hold there:
 *  - the provider registers as "verbs" with rsverbs' version (1000.x);
 *  - fi_getinfo either returns rsverbs infos only, or -FI_ENODATA (no device);
 *  - fi_fabric works without a device, closes cleanly, and bad arguments get
 *    specific negative codes instead of crashes.
 * Prints one "ok/FAIL <check>" line per check and "N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

static int passed, failed;
#define CHECK(cond, ...) do { if (cond) { passed++; printf("ok   "); } else { failed++; printf("FAIL "); } \
	printf(__VA_ARGS__); printf("\n"); } while (0)

int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL, *cur;
	struct fid_fabric *fabric = NULL;
	struct fi_fabric_attr fattr;
	int ret;

	hints->fabric_attr->prov_name = strdup("verbs");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == 0 || ret == -FI_ENODATA, "fi_getinfo(verbs) = %d (0 or -FI_ENODATA)", ret);
	for (cur = info; cur; cur = cur->next)
		CHECK(cur->fabric_attr->prov_version == FI_VERSION(1000, 1),
		      "info for %s comes from rsverbs (prov_version %u.%u)", cur->domain_attr->name,
		      FI_MAJOR(cur->fabric_attr->prov_version), FI_MINOR(cur->fabric_attr->prov_version));
	fi_freeinfo(info);

	/* FI_PROV_ATTR_ONLY is answered by the core from the registered providers. */
	info = NULL;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, FI_PROV_ATTR_ONLY, hints, &info);
	{
		int ours = 0;
		for (cur = info; cur; cur = cur->next)
			if (!strcmp(cur->fabric_attr->prov_name, "verbs") &&
			    cur->fabric_attr->prov_version == FI_VERSION(1000, 1))
				ours++;
		CHECK(ret == 0 && ours >= 1, "FI_PROV_ATTR_ONLY lists verbs at version 1000.1 (ret %d, %d found)", ret, ours);
	}
	fi_freeinfo(info);

	/* Hints our provider cannot satisfy: tagged messages on MSG endpoints. */
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_TAGGED;
	info = NULL;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == -FI_ENODATA, "fi_getinfo(MSG + FI_TAGGED) = %d (-FI_ENODATA)", ret);
	fi_freeinfo(info);

	memset(&fattr, 0, sizeof fattr);
	fattr.prov_name = "verbs";
	fattr.name = "IB-0xfe80000000000000";
	fattr.api_version = FI_VERSION(1, 17);
	ret = fi_fabric(&fattr, &fabric, NULL);
	CHECK(ret == 0 && fabric, "fi_fabric(IB-0xfe80000000000000) = %d", ret);
	if (fabric) {
		struct fid_domain *dom = NULL;
		struct fi_info *di = fi_allocinfo();
		di->domain_attr->name = strdup("no-such-device0");
		di->fabric_attr->name = strdup("IB-0xfe80000000000000");
		di->ep_attr->type = FI_EP_MSG;
		ret = fi_domain(fabric, di, &dom, NULL);
		CHECK(ret == -FI_ENODEV, "fi_domain(no such device) = %d (-FI_ENODEV)", ret);
		ret = fi_domain(fabric, NULL, &dom, NULL);
		CHECK(ret == -FI_EINVAL, "fi_domain(NULL info) = %d (-FI_EINVAL)", ret);
		ret = fi_domain(fabric, di, NULL, NULL);
		CHECK(ret == -FI_EINVAL, "fi_domain(NULL out) = %d (-FI_EINVAL)", ret);
		ret = fabric->ops->domain((struct fid_fabric *)di, di, &dom, NULL);
		CHECK(ret == -FI_EINVAL, "fi_domain on a non-fabric object = %d (-FI_EINVAL)", ret);
		ret = fi_eq_open(fabric, NULL, NULL, NULL);
		CHECK(ret == -FI_EINVAL, "fi_eq_open(NULL attr) = %d (-FI_EINVAL)", ret);
		ret = fi_wait_open(fabric, NULL, NULL);
		CHECK(ret == -FI_EINVAL, "fi_wait_open(NULL) = %d (-FI_EINVAL)", ret);
		{
			struct fi_wait_attr wa = { .wait_obj = FI_WAIT_MUTEX_COND };
			struct fid_wait *ws = NULL;
			ret = fi_wait_open(fabric, &wa, &ws);
			CHECK(ret == -FI_ENOSYS, "fi_wait_open(FI_WAIT_MUTEX_COND) = %d (-FI_ENOSYS)", ret);
			wa.wait_obj = FI_WAIT_FD;
			wa.flags = 1;
			ret = fi_wait_open(fabric, &wa, &ws);
			CHECK(ret == -FI_EBADFLAGS, "fi_wait_open(flags 1) = %d (-FI_EBADFLAGS)", ret);
			wa.flags = 0;
			ret = fi_wait_open(fabric, &wa, &ws);
			CHECK(ret == 0 && ws, "fi_wait_open(FI_WAIT_FD) = %d", ret);
			if (ret == 0) {
				int fd = -1;
				enum fi_wait_obj wo = FI_WAIT_NONE;
				ret = fi_control(&ws->fid, FI_GETWAIT, &fd);
				CHECK(ret == 0 && fd >= 0, "fi_control(wait set, FI_GETWAIT) = %d, fd %d", ret, fd);
				ret = fi_control(&ws->fid, FI_GETWAITOBJ, &wo);
				CHECK(ret == 0 && wo == FI_WAIT_FD, "FI_GETWAITOBJ = %d, %d", ret, (int)wo);
				ret = fi_wait(ws, 20);
				CHECK(ret == -FI_ETIMEDOUT, "fi_wait(empty set, 20 ms) = %d (-FI_ETIMEDOUT)", ret);
				struct fid *f = &ws->fid;
				ret = fi_trywait(fabric, &f, 1);
				CHECK(ret == 0, "fi_trywait(empty wait set) = %d (0)", ret);
				ret = fi_close(&ws->fid);
				CHECK(ret == 0, "fi_close(wait set) = %d", ret);
			}
		}
		ret = fi_trywait(fabric, NULL, 1);
		CHECK(ret == -FI_EINVAL, "fi_trywait(NULL fids, 1) = %d (-FI_EINVAL)", ret);
		ret = fi_control(&fabric->fid, FI_GETWAIT, NULL);
		CHECK(ret == -FI_ENOSYS, "fi_control(fabric, FI_GETWAIT) = %d (-FI_ENOSYS)", ret);
		fi_freeinfo(di);
		ret = fi_close(&fabric->fid);
		CHECK(ret == 0, "fi_close(fabric) = %d", ret);
	}
	fattr.name = "not-a-verbs-fabric";
	fabric = NULL;
	ret = fi_fabric(&fattr, &fabric, NULL);
	CHECK(ret == -FI_ENODATA, "fi_fabric(foreign name) = %d (-FI_ENODATA)", ret);

	hints->fabric_attr->prov_name = NULL; /* freed by fi_freeinfo otherwise: it was strdup'd above */
	fi_freeinfo(hints);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
