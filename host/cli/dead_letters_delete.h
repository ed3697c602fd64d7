/* dead_letters_delete: `luastream dead-letters delete STREAM (--id ID... |
 * --reason REASON | --all) [--yes]` deletes dead letters, so that nobody
 * needs XDEL by hand: only entries with dead-letter provenance, and without
 * --yes only says what it would delete. Every command names STREAM as its
 * key (TYPE, XREVRANGE, XRANGE, XDEL), so it runs on a Redis Cluster too. */
#ifndef LUASTREAM_DEAD_LETTERS_DELETE_H
#define LUASTREAM_DEAD_LETTERS_DELETE_H

/* argv: what follows "dead-letters delete". Returns the exit status: 0, 1
 * when an id was refused, an entry that is not a dead letter was left (said
 * on stderr) or the server could not be used, 2 on a usage error. */
int cmd_dl_delete(int argc, char **argv);

#endif
