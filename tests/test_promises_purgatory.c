/* SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L

#include "stop_points.h"

#include "check.h"

int main(void)
{
	sp_install();
	(void)check_failures;
	return check_report();
}
