/*
 * safe_static_libgcc: safe_exc.cc built with -static-libgcc
 * -static-libstdc++ (the Makefile): the program throws with its own static
 * copy of libgcc's unwinder and libstdc++, not the shared ones.
 */
#include "safe_exc.cc"
