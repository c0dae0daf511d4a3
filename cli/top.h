/* SPDX-License-Identifier: MIT */
#ifndef TALLY_CLI_TOP_H
#define TALLY_CLI_TOP_H

/*
 * top.h - what the files of `tally top` share: the limits, the command
 * line, texts, sources, the parsed exposition and the model.  The flow of
 * a refresh: top_source.c reads the source into a text, top_parse.c
 * parses it into an exposition, top_model.c builds the model (trees of
 * groups), top_render.c draws it; top.c is the command and the terminal,
 * top_text.c the texts and the safe output of everything a label brings.
 */

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status: the source was read but holds no exposition we can show. */
#define TOP_EXIT_BAD_INPUT 3

#define MAX_EXPOSITION (32ul << 20)	/* bytes of an exposition (HTTP body) */
#define MAX_HEADER (64ul << 10)	/* bytes of an HTTP response's header */
#define MAX_URL 2048u
#define MAX_DEPTH 256u		/* deepest group shown (the root is 0) */
#define DEFAULT_WIDTH 120u	/* columns without a terminal or $COLUMNS */
#define NAME_COLS_MAX 40u	/* widest group column */
#define VALUE_COLS 8u		/* a value's column */
#define STAT_COLS_MAX 14u	/* widest stat column (its header cut) */
#define MAX_ERROR 512u

/* The limits a memory group's line shows; >= 2^63 or +Inf is no limit. */
#define UNLIMITED_FROM 9223372036854775807.0

enum sort_key { SORT_USAGE, SORT_NAME };

struct top_args {
	double interval, timeout;
	enum sort_key sort;
	unsigned int depth;
	bool once;
	const char *source;
};

/* Set by the signal handlers of top.c; a wait returns early on quit. */
extern volatile sig_atomic_t quit_asked, resized;

/* --- top_text.c ---------------------------------------------------------- */

/* A growing text; a failed growth sets @failed and later writes drop. */
struct text {
	char *p;
	size_t len, cap;
	bool failed;
};

extern bool utf8_terminal;	/* the locale's character set is UTF-8 */

bool text_reserve(struct text *t, size_t n);
void text_mem(struct text *t, const void *s, size_t n);
void text_str(struct text *t, const char *s);
void text_chars(struct text *t, char c, size_t n);
void text_free(struct text *t);
size_t put_safe(struct text *t, const char *s, size_t n, size_t max);
size_t fit_columns(const char *s, size_t n, size_t max);

/* A message into @err (MAX_ERROR bytes); @what is shown safely. */
void errorf(char *err, const char *what, size_t what_len,
		   const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* --- top_source.c -------------------------------------------------------- */

/**
 * struct url - an http:// URL, checked.
 * @host: the host as written ("127.0.0.1", "localhost", "::1" unbracketed).
 * @port: the port, decimal.
 * @authority: host[:port] as the URL has it, for the Host header.
 * @path: the path and query ("/metrics" when the URL has none).
 */
struct url {
	char host[256];
	char port[6];
	char authority[270];
	char path[MAX_URL + 1];
};

struct source {
	const char *arg;	/* as given */
	bool http;
	struct url url;
};

bool is_alpha(int c);
bool is_digit(int c);
bool looks_like_url(const char *s);
const char *parse_url(const char *s, struct url *u);
double now_s(void);
int load_http(const struct source *src, double timeout,
		     struct text *t, bool *openmetrics, char *err);
int load_file(const struct source *src, struct text *t, char *err);

/* --- top_parse.c --------------------------------------------------------- */

/* A sample with a group label; @name and @group point into the text. */
struct sample {
	const char *name, *group;
	size_t name_len, group_len;
	double value;
	size_t line;
};

/* A PREFIX_accuracy_bound sample. */
struct bound {
	const char *prefix;
	size_t len;
	double value;
};

struct exposition {
	struct sample *s;
	size_t nr, cap;
	struct bound *b;
	size_t nr_b, cap_b;
};

void *grow_array(void *p, size_t *cap, size_t need, size_t size);
bool ends_with(const char *s, size_t n, const char *suffix);
int parse_exposition(struct text *t, bool openmetrics,
			    struct exposition *x, const char *src, char *err);

/* --- top_index.c --------------------------------------------------------- */

/* A name (into the text) and its number; @name NULL: an empty slot. */
struct name_slot {
	const char *name;
	size_t len;
	uint64_t hash;
	size_t val;
};

struct name_index {
	struct name_slot *slot;
	size_t size, nr;
};

/* name_hash() of a name is name_hash_end(name_hash_more(start, it), n). */
uint64_t name_hash_start(void);
uint64_t name_hash_more(uint64_t h, const char *s, size_t n);
uint64_t name_hash_end(uint64_t h, size_t n);
uint64_t name_hash(const char *s, size_t n);
/* The number of name @s (hash @h), or SIZE_MAX. */
size_t index_find(const struct name_index *ix, const char *s, size_t n,
		  uint64_t h);
/* Map @s to @val (added, or replacing its number); false: no memory. */
bool index_put(struct name_index *ix, const char *s, size_t n, uint64_t h,
	       size_t val);
void index_free(struct name_index *ix);

/* --- top_model.c --------------------------------------------------------- */

enum {
	MEM_CURRENT,
	MEM_PEAK,
	MEM_MIN,
	MEM_LOW,
	MEM_HIGH,
	MEM_MAX,
	MEM_NR_FIXED,	/* then one column per event */
};

/* A column: a stat, or an event of a memory section. */
struct column {
	const char *name;	/* into the text */
	size_t len;
	bool bytes;		/* a stat whose name ends in "_bytes" */
	bool event;		/* a counter (its samples end in "_total") */
	double root;		/* its value at the root, for the ranking */
	bool nonzero;		/* non-zero in some group */
};

/* A group: @path points into the text; its parent's path is a prefix. */
struct node {
	const char *path;
	size_t path_len;
	const char *name;	/* the last component */
	size_t name_len;
	size_t parent;		/* SIZE_MAX for the root */
	unsigned int depth;
	size_t *kids;
	size_t nr_kids;
	size_t first_val, nr_vals;	/* its values in its section's */
};

/* A group's value in a column; a section's are by group, then column. */
struct value {
	size_t col;
	double v;
};

struct section {
	bool memory;
	const char *prefix;
	size_t prefix_len;
	struct column *cols;	/* memory: the events; stats: the stats */
	size_t nr_cols, cap_cols;
	struct name_index col_index;
	struct node *nodes;
	size_t nr_nodes, cap_nodes;
	struct name_index node_index;	/* by path */
	struct value *vals;	/* the samples' values, by group */
	double bound;		/* accuracy bound, NAN when none */
	const struct section *memory_of; /* memory.stat of that section */
	const struct section *stats[2];	/* memory: its memory.stat ones */
	size_t nr_stats;
};

struct model {
	struct section *secs;
	size_t nr_secs, cap_secs;
	struct name_index by_prefix[2];	/* stats, memory sections */
	size_t too_deep;	/* samples of groups deeper than MAX_DEPTH */
};

void model_free(struct model *m);
/* Group @node's value in column @col (memory: MEM_* then the events). */
double node_value(const struct section *s, size_t node, size_t col);
int build_model(const struct exposition *x, struct model *m,
		const char *src, char *err);

/* --- top_render.c -------------------------------------------------------- */

void render_model(const struct model *m, const struct top_args *a,
			 size_t width, struct text *out);

#endif /* TALLY_CLI_TOP_H */
