/*
 * A libmodbus peer for interop_test.go: the reference rate of a C client
 * and server pair, and an independent implementation to talk to.
 *
 *   libmodbus_peer client HOST PORT SECONDS   polls 10 holding registers
 *       back to back; prints "polls SECONDS" then the last values read.
 *   libmodbus_peer server PORT                serves holding register i =
 *       3*i (i < 200) on 127.0.0.1, one client at a time, until killed.
 */
#include <errno.h>
#include <modbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int client(const char *host, int port, double seconds) {
	modbus_t *ctx = modbus_new_tcp(host, port);
	if (ctx == NULL || modbus_connect(ctx) == -1) {
		fprintf(stderr, "connect: %s\n", modbus_strerror(errno));
		return 1;
	}
	modbus_set_slave(ctx, 1);
	uint16_t regs[10];
	long polls = 0;
	double start = now(), elapsed = 0;
	while (elapsed < seconds) {
		if (modbus_read_registers(ctx, 0, 10, regs) != 10) {
			fprintf(stderr, "read: %s\n", modbus_strerror(errno));
			return 1;
		}
		if (++polls % 64 == 0)
			elapsed = now() - start;
	}
	elapsed = now() - start;
	printf("%ld %.6f\n", polls, elapsed);
	for (int i = 0; i < 10; i++)
		printf("%s%u", i ? "," : "", regs[i]);
	printf("\n");
	modbus_close(ctx);
	modbus_free(ctx);
	return 0;
}

static int server(int port) {
	modbus_mapping_t *mb = modbus_mapping_new(16, 16, 200, 200);
	for (int i = 0; i < 200; i++)
		mb->tab_registers[i] = 3 * i;
	modbus_t *ctx = modbus_new_tcp("127.0.0.1", port);
	int s = modbus_tcp_listen(ctx, 4);
	if (s == -1) {
		fprintf(stderr, "listen: %s\n", modbus_strerror(errno));
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	uint8_t query[MODBUS_TCP_MAX_ADU_LENGTH];
	for (;;) {
		if (modbus_tcp_accept(ctx, &s) == -1)
			return 1;
		for (;;) {
			int rc = modbus_receive(ctx, query);
			if (rc > 0)
				modbus_reply(ctx, query, rc, mb);
			else if (rc == -1)
				break;
		}
		modbus_close(ctx);
	}
}

int main(int argc, char **argv) {
	if (argc == 5 && strcmp(argv[1], "client") == 0)
		return client(argv[2], atoi(argv[3]), atof(argv[4]));
	if (argc == 3 && strcmp(argv[1], "server") == 0)
		return server(atoi(argv[2]));
	fprintf(stderr, "usage: libmodbus_peer client HOST PORT SECONDS | server PORT\n");
	return 2;
}
