/*
 * A small program with a recognizable heap profile, used by `make demo`:
 * a word-frequency cache that keeps its table (live at exit), churns
 * temporary line buffers (allocated and freed), and leaks one buffer per
 * 100 lines from a function named leak_some_lines.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	char *word;
	unsigned count;
	struct entry *next;
};

#define BUCKETS 4096
static struct entry *table[BUCKETS];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned hash(const char *s)
{
	unsigned h = 5381;
	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h % BUCKETS;
}

static void cache_word(const char *w)
{
	unsigned h = hash(w);
	pthread_mutex_lock(&table_lock);
	for (struct entry *e = table[h]; e; e = e->next)
		if (!strcmp(e->word, w)) {
			e->count++;
			pthread_mutex_unlock(&table_lock);
			return;
		}
	struct entry *e = malloc(sizeof(*e));
	e->word = strdup(w);
	e->count = 1;
	e->next = table[h];
	table[h] = e;
	pthread_mutex_unlock(&table_lock);
}

static char *make_line(unsigned seed, unsigned n)
{
	char *line = malloc(n * 8 + 1);
	char *p = line;
	for (unsigned i = 0; i < n; i++)
		p += sprintf(p, "w%05u ",
		             (seed * 7919u + i * 104729u) % 20000u);
	return line;
}

static char *volatile last_lost;

static void leak_some_lines(unsigned i)
{
	if (i % 100 == 0) {
		char *lost = malloc(2048);
		memset(lost, 'x', 2048);
		last_lost = lost; /* overwritten next time: a leak */
	}
}

static void *worker(void *arg)
{
	unsigned id = (unsigned)(size_t)arg;
	for (unsigned i = 0; i < 20000; i++) {
		char *line = make_line(id * 100000 + i, 8);
		char *save, *w = strtok_r(line, " ", &save);
		for (; w; w = strtok_r(NULL, " ", &save))
			cache_word(w);
		free(line);
		leak_some_lines(i);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[4];
	for (size_t i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	unsigned words = 0;
	for (int i = 0; i < BUCKETS; i++)
		for (struct entry *e = table[i]; e; e = e->next)
			words++;
	printf("demo: %u distinct words cached\n", words);
	return 0;
}
