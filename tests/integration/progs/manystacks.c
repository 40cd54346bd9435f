/*
 * manystacks N [ROUNDS]: bench/manystacks.c built as a test program, so a
 * test can count on exactly N distinct allocating stacks (test_scale.sh).
 */
#include "../../../bench/manystacks.c"
