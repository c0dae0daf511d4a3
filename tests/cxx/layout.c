// SPDX-License-Identifier: MIT
/*
 * layout.c - the size and alignment of every public type as the C
 * compiler, which builds the library, lays them out (see layout.h).
 */
#include "layout.h"

#define LAYOUT_SIZE(type) sizeof(type),
#define LAYOUT_ALIGN(type) _Alignof(type),

const size_t layout_c_size[] = { LAYOUT_TYPES(LAYOUT_SIZE) };
const size_t layout_c_align[] = { LAYOUT_TYPES(LAYOUT_ALIGN) };
