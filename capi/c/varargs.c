/* The two variadic functions of libfabric's core API, which stable Rust
 * cannot define: they format their arguments with vsnprintf and hand the
 * resulting string to Rust (capi/core_api/log.rs and
 * params.rs). Linked only into the cdylib
 * (build.rs), with libfabric's symbol versions. */
#include <stdarg.h>
#include <stdio.h>
#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>
#include <rdma/providers/fi_log.h>

void rsverbs_core_log(const struct fi_provider *prov, int level, int subsys,
		      const char *func, int line, const char *msg);
int rsverbs_core_param_define(const struct fi_provider *prov, const char *name,
			      int type, const char *help);

__attribute__((visibility("default")))
void rsverbs_c_fi_log(const struct fi_provider *prov, enum fi_log_level level,
		      enum fi_log_subsys subsys, const char *func, int line,
		      const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!fmt)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rsverbs_core_log(prov, (int) level, (int) subsys, func, line, msg);
}
__asm__(".symver rsverbs_c_fi_log, fi_log@@FABRIC_1.0");

__attribute__((visibility("default")))
int rsverbs_c_fi_param_define(const struct fi_provider *prov, const char *name,
			      enum fi_param_type type, const char *help_fmt, ...)
{
	char help[1024];
	va_list ap;

	help[0] = '\0';
	if (help_fmt) {
		va_start(ap, help_fmt);
		vsnprintf(help, sizeof(help), help_fmt, ap);
		va_end(ap);
	}
	return rsverbs_core_param_define(prov, name, (int) type, help);
}
__asm__(".symver rsverbs_c_fi_param_define, fi_param_define@@FABRIC_1.0");
