// SPDX-License-Identifier: MIT
/*
 * fuzz_names.c - the group-name rules and the tree of names
 * (src/names/names.c) on any bytes, read as a path "a/b/c".
 * Properties: names_valid() is exactly the documented rule (1 to max
 * bytes, no '/'; max from the first byte); names_find() answers -EINVAL
 * exactly when a component is empty, -ENOENT before the components are
 * inserted, 0 after, and the node found has the path given
 * (names_path()); the sorted walk meets every node once, a parent
 * before its children, siblings in byte order.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "names/names.h"

#define MAX_NODES 64

struct walk {
	const char *last[MAX_NODES + 2];	/* per depth, the last name */
	size_t met;
};

static struct name_node *nodes;
static size_t nr_nodes;
static struct name_node root;

/* The children, in the table's order (the walk sorts them). */
static struct name_node *child(struct name_node *n, struct name_node *prev)
{
	size_t i = prev ? (size_t)(prev - nodes) + 1 : 0;

	for (; i < nr_nodes; i++)
		if (nodes[i].up == n)
			return &nodes[i];
	return NULL;
}

static int visit(struct name_node *n, unsigned int depth, void *arg)
{
	struct walk *w = arg;

	CHECK(depth <= MAX_NODES + 1);
	if (depth && w->last[depth])
		CHECK(strcmp(w->last[depth], n->name) < 0);
	w->last[depth] = n->name;
	if (depth + 1 <= MAX_NODES + 1)
		w->last[depth + 1] = NULL;
	CHECK(!depth == !n->up);
	w->met++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct name_node *found;
	struct name_table t;
	struct name_node all[MAX_NODES];
	char *path, buf[4096];
	bool empty = false;
	size_t max, n;
	struct walk w = { { NULL }, 0 };

	if (!size)
		return 0;
	max = data[0];
	path = strndup((const char *)data + 1, size - 1);
	CHECK(path);
	n = strlen(path);
	/* The documented rule, written plainly. */
	CHECK(names_valid(path, max) ==
	      (n >= 1 && n <= max && !strchr(path, '/')));
	CHECK(!names_init(&t));
	CHECK(!name_node_init(&root, NULL, "", 0));
	nodes = all;
	nr_nodes = 0;
	for (const char *p = path;; p++) {
		size_t len = strcspn(p, "/");

		empty |= len == 0;
		if (!p[len])
			break;
		p += len;
	}
	if (n == 0)
		empty = false;	/* "" is the root */
	CHECK(names_find(&t, &root, path, &found) ==
	      (empty ? -EINVAL : n ? -ENOENT : 0));
	if (!empty) {
		struct name_node *up = &root;

		for (const char *p = path; n && nr_nodes < MAX_NODES; p++) {
			size_t len = strcspn(p, "/");
			struct name_node *c = names_child(&t, up, p, len);

			if (!c) {
				c = &all[nr_nodes];
				CHECK(!name_node_init(c, up, p, len));
				CHECK(!names_reserve(&t));
				names_insert(&t, c);
				nr_nodes++;
			}
			CHECK(c->len == len && !memcmp(c->name, p, len));
			up = c;
			if (!p[len])
				break;
			p += len;
		}
		if (nr_nodes < MAX_NODES && !names_find(&t, &root, path,
							&found)) {
			int len = names_path(found, buf, sizeof(buf));

			CHECK(len == -ENOSPC ? n + 1 > sizeof(buf) :
			      (size_t)len == n && !strcmp(buf, path));
		}
		CHECK(!names_walk_sorted(&root, nr_nodes + 1, child, visit,
					 &w));
		CHECK(w.met == nr_nodes + 1);
	}
	for (size_t i = 0; i < nr_nodes; i++) {
		names_remove(&t, &all[i]);
		name_node_fini(&all[i]);
	}
	name_node_fini(&root);
	names_fini(&t);
	free(path);
	return 0;
}
