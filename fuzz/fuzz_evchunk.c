/*
 * The event trace's chunk decoder (src/store/evchunk.c): a profile's
 * heapprof_event_chunk.data is read back by every command that reads a
 * trace, and a profile is a file anyone may hand over.
 *
 * The input is a chunk's blob.  Beyond "no crash, no leak, no undefined
 * behaviour" (a damaged blob is refused with -EINVAL, never read past),
 * what decodes must encode again to a blob that decodes to the same
 * events, field by field.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "store/evchunk.h"

static struct evc_dec *dec, *dec2;
static struct evc_enc *enc;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	dec = evc_dec_new();
	dec2 = evc_dec_new();
	enc = evc_enc_new();
	if (!dec || !dec2 || !enc)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct evc_event *ev, *again;
	size_t n, m, len;
	const void *blob;

	int rc = evc_decode(dec, data, size, &ev, &n);
	if (rc == -EINVAL || rc == -ENOMEM)
		return 0;
	if (rc || !n || n > EVC_MAX_EVENTS)
		abort();
	if (evc_encode(enc, ev, n, 1, &blob, &len))
		return 0; /* out of memory */
	if (evc_decode(dec2, blob, len, &again, &m) || m != n)
		abort();
	for (size_t i = 0; i < n; i++) {
		const struct evc_event *a = &ev[i], *b = &again[i];
		if (a->ts != b->ts || a->address != b->address ||
		    a->size != b->size || a->charged != b->charged ||
		    a->stack_key != b->stack_key ||
		    a->alloc_ts != b->alloc_ts || a->tid != b->tid ||
		    a->heap != b->heap || a->free != b->free)
			abort();
	}
	return 0;
}
