/* JUnit XML (junit.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "export/junit.h"
#include "util/err.h"

/* s as XML attribute or text: the five specials escaped, and the control
 * bytes XML 1.0 does not allow as '?'. */
static void xml_put(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '&')
			fputs("&amp;", f);
		else if (ch == '<')
			fputs("&lt;", f);
		else if (ch == '>')
			fputs("&gt;", f);
		else if (ch == '"')
			fputs("&quot;", f);
		else if (ch < 0x20 && ch != '\t')
			fputc('?', f);
		else
			fputc(ch, f);
	}
}

int junit_write(const char *path, const char *suite, const char *cls,
                const struct junit_case *c, size_t n, const char *subsys)
{
	size_t nfail = 0;
	for (size_t k = 0; k < n; k++)
		nfail += c[k].fail != 0;
	FILE *f = fopen(path, "w");
	if (!f) {
		hp_err(subsys, "%s: %s", path, strerror(errno));
		return -1;
	}
	fprintf(f,
	        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	        "<testsuites tests=\"%zu\" failures=\"%zu\">\n"
	        "  <testsuite name=\"",
	        n, nfail);
	xml_put(f, suite);
	fprintf(f, "\" tests=\"%zu\" failures=\"%zu\" errors=\"0\">\n", n,
	        nfail);
	for (size_t k = 0; k < n; k++) {
		fputs("    <testcase classname=\"", f);
		xml_put(f, cls);
		fputs("\" name=\"", f);
		xml_put(f, c[k].name);
		fputs("\">\n", f);
		if (c[k].nprop) {
			fputs("      <properties>\n", f);
			for (size_t i = 0; i < c[k].nprop; i++) {
				fputs("        <property name=\"", f);
				xml_put(f, c[k].prop[i].name);
				fprintf(f, "\" value=\"%.17g\"/>\n",
				        c[k].prop[i].v);
			}
			fputs("      </properties>\n", f);
		}
		if (c[k].fail) {
			fputs("      <failure message=\"", f);
			xml_put(f, c[k].out);
			fputs("\">", f);
			xml_put(f, c[k].out);
			fputs("</failure>\n", f);
		}
		fputs("      <system-out>", f);
		xml_put(f, c[k].out);
		fputs("</system-out>\n    </testcase>\n", f);
	}
	fputs("  </testsuite>\n</testsuites>\n", f);
	if (fclose(f) != 0) {
		hp_err(subsys, "%s: writing failed", path);
		return -1;
	}
	return 0;
}
