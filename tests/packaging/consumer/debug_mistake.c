/* SPDX-License-Identifier: MIT */
/*
 * A user of the installed checked build, timingwheel-debug (tests/packaging/
 * install_variant.sh): a wheel initialised with a tick of 0. Every
 * build returns TW_EINVAL; only the checked library also says on stderr
 * which call and why, so the test can tell that this program linked it and
 * not the plain one.
 */
#include <stdio.h>

#include <timingwheel/timingwheel.h>

int main(void)
{
	struct tw_wheel w;
	int rc = tw_wheel_init(&w, 0, 64, 0, TW_MODE_EXACT);

	if (rc != TW_EINVAL) {
		printf("tw_wheel_init with tick 0 returned %d, not TW_EINVAL\n", rc);
		return 1;
	}
	return 0;
}
