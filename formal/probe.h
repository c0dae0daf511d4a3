/*
 * probe.h - EVENT(k, c) of the models: "path k is taken here (when c
 * holds)".  Built with spin -DPROBES, each EVENT is an assertion that
 * fails when the environment has SPIN_PROBE=k, so that one pan binary
 * shows, run once per k, that spin reaches every path the model names:
 * the proof that a verification without errors is not vacuous
 * (scripts/check-spin.sh).  Without PROBES, or with SPIN_PROBE unset, an
 * EVENT never fails; a trail is replayed (spin -t) without PROBES, as
 * spin's simulation does not run embedded C.
 */
#ifdef PROBES
c_code {
	int probe;

	__attribute__((constructor)) static void probe_init(void)
	{
		const char *s = getenv("SPIN_PROBE");

		probe = s ? atoi(s) : 0;
	}
}
#define EVENT(k, c)	assert(!(c) || !c_expr { probe == k })
#else
#define EVENT(k, c)	skip
#endif
