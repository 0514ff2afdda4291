/*
 * mock-broker: a Kafka-protocol broker for local tests, made of librdkafka's
 * mock cluster (librdkafka/rdkafka_mock.h, Debian's librdkafka-dev 2.0.2).
 *
 *   usage: mock-broker [-b BROKERS] [TOPIC:PARTITIONS ...]
 *
 * Creates a mock cluster with BROKERS brokers (default 1), pre-creates the
 * given topics (replication factor 1), prints the bootstrap servers string
 * (e.g. "127.0.0.1:39233") as one line on stdout, then blocks until SIGTERM
 * or SIGINT and destroys the cluster.
 *
 * Fault tests take the brokers down and up again without losing the data the
 * cluster holds in memory (a killed process would lose it all):
 *   SIGUSR1  every broker goes down: connections are closed, new ones refused
 *            (rd_kafka_mock_broker_set_down; no leader change)
 *   SIGUSR2  every broker accepts connections again (rd_kafka_mock_broker_set_up)
 * Each change is confirmed by a line "mock-broker: brokers down|up" on stderr,
 * written after the cluster has applied it (infra/local/kafka.sh waits for it).
 *
 * The listen address cannot be chosen: librdkafka 2.0.2 has no listener API
 * (no rd_kafka_mock_broker_set_host or similar); every mock broker listens on
 * 127.0.0.1 on an ephemeral port picked by the kernel. The printed bootstrap
 * string is the only source of truth for the port.
 *
 * Build: gcc -O2 -o mock-broker mock-broker.c -lrdkafka
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

static void usage(const char *prog) {
        fprintf(stderr, "usage: %s [-b BROKERS] [TOPIC:PARTITIONS ...]\n",
                prog);
}

int main(int argc, char **argv) {
        int brokers = 1, opt, i;
        char errstr[512];
        sigset_t sigs;
        int sig = 0;

        while ((opt = getopt(argc, argv, "b:h")) != -1) {
                switch (opt) {
                case 'b':
                        brokers = atoi(optarg);
                        if (brokers < 1) {
                                fprintf(stderr, "mock-broker: bad -b %s\n",
                                        optarg);
                                return 2;
                        }
                        break;
                default:
                        usage(argv[0]);
                        return opt == 'h' ? 0 : 2;
                }
        }

        /* Block the signals before librdkafka starts its threads, so they
         * inherit the mask and the main thread can take them with sigwait. */
        sigemptyset(&sigs);
        sigaddset(&sigs, SIGTERM);
        sigaddset(&sigs, SIGINT);
        sigaddset(&sigs, SIGUSR1);
        sigaddset(&sigs, SIGUSR2);
        pthread_sigmask(SIG_BLOCK, &sigs, NULL);

        /* The mock cluster needs an rd_kafka_t to live in: a producer with a
         * dummy config; it never connects anywhere (no bootstrap.servers). */
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        if (rd_kafka_conf_set(conf, "client.id", "mock-broker", errstr,
                              sizeof(errstr)) != RD_KAFKA_CONF_OK ||
            rd_kafka_conf_set(conf, "log_level", "4", errstr,
                              sizeof(errstr)) != RD_KAFKA_CONF_OK) {
                fprintf(stderr, "mock-broker: config: %s\n", errstr);
                return 1;
        }
        rd_kafka_t *rk =
            rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
        if (!rk) {
                fprintf(stderr, "mock-broker: rd_kafka_new: %s\n", errstr);
                return 1;
        }

        rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, brokers);
        if (!mc) {
                fprintf(stderr, "mock-broker: rd_kafka_mock_cluster_new failed\n");
                rd_kafka_destroy(rk);
                return 1;
        }

        for (i = optind; i < argc; i++) {
                char name[256];
                const char *colon = strrchr(argv[i], ':');
                int parts = 1;
                size_t len = colon ? (size_t)(colon - argv[i]) : strlen(argv[i]);
                if (colon) {
                        char *end;
                        parts = (int)strtol(colon + 1, &end, 10);
                        if (*end || parts < 1) {
                                fprintf(stderr, "mock-broker: bad topic spec '%s'\n",
                                        argv[i]);
                                goto fail;
                        }
                }
                if (len == 0 || len >= sizeof(name)) {
                        fprintf(stderr, "mock-broker: bad topic spec '%s'\n", argv[i]);
                        goto fail;
                }
                memcpy(name, argv[i], len);
                name[len] = '\0';
                rd_kafka_resp_err_t err =
                    rd_kafka_mock_topic_create(mc, name, parts, 1);
                if (err) {
                        fprintf(stderr, "mock-broker: topic %s: %s\n", name,
                                rd_kafka_err2str(err));
                        goto fail;
                }
                fprintf(stderr, "mock-broker: topic %s with %d partitions\n",
                        name, parts);
        }

        printf("%s\n", rd_kafka_mock_cluster_bootstraps(mc));
        fflush(stdout);

        for (;;) {
                if (sigwait(&sigs, &sig) != 0)
                        continue;
                if (sig == SIGUSR1 || sig == SIGUSR2) {
                        /* -1: every broker. The call returns once the
                         * cluster's thread has applied the change. */
                        rd_kafka_resp_err_t err =
                            sig == SIGUSR1
                                ? rd_kafka_mock_broker_set_down(mc, -1)
                                : rd_kafka_mock_broker_set_up(mc, -1);
                        if (err)
                                fprintf(stderr, "mock-broker: brokers %s: %s\n",
                                        sig == SIGUSR1 ? "down" : "up",
                                        rd_kafka_err2str(err));
                        else
                                fprintf(stderr, "mock-broker: brokers %s\n",
                                        sig == SIGUSR1 ? "down" : "up");
                        fflush(stderr);
                        continue;
                }
                break;
        }
        fprintf(stderr, "mock-broker: signal %d, shutting down\n", sig);

        rd_kafka_mock_cluster_destroy(mc);
        rd_kafka_destroy(rk);
        return 0;

fail:
        rd_kafka_mock_cluster_destroy(mc);
        rd_kafka_destroy(rk);
        return 1;
}
