/* SPDX-License-Identifier: MIT */
/* The fuzzers read their input a byte at a time; past the end, zeros. */
#ifndef TW_FUZZ_INPUT_H
#define TW_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

struct input {
	const uint8_t *p;
	size_t n;
};

static inline unsigned take(struct input *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

#endif
