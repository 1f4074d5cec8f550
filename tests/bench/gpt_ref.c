/* gpt_ref.c - one side of the GPT cross-check with PyTorch (tests/cli/gpt_equiv.py is the
 * other): one training forward and backward of a text model (default gpt-tiny, no dropout)
 * on the CPU backend, minibatch 4, deterministic token ids and labels, writing into DIR:
 *   meta.txt      B T V d blocks heads tie, one line
 *   params.bin    the initial parameters, float32 in hetpipe's layout (layers.h, net.h)
 *   tokens.bin    the input token ids, int32 [B, T]
 *   labels.bin    the labels, int32 [B, T]
 *   logits.bin    the output, float32 [B, T, V]
 *   loss.txt      the mean loss over the B x T positions
 *   grads.bin     every parameter's gradient, float32, parallel to params.bin
 * Usage: gpt_ref DIR [MODEL]
 */
#include "backend.h"
#include "model.h"
#include "net.h"
#include "rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 4

static int write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        perror(path);
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".", *name = argc > 2 ? argv[2] : "gpt-tiny";
    struct hp_model *m = NULL;
    struct hp_backend *be = NULL;
    struct hp_net *net = NULL;
    const struct hp_net_config cfg = {.batch = BATCH, .nslots = 1};
    char text[256];
    double loss;
    int correct;

    hp_backend_cpu_set_threads(1);
    if (hp_model_load(name, &m) || !m->positions || hp_backend_cpu_create(&be) ||
        hp_net_create(be, m, 0, m->nunits, &cfg, &net) || hp_net_init_params(net, 1))
        return 1;
    const int T = m->positions, V = m->classes, n = BATCH * T;
    const struct hp_op *att = &m->units[1].ops[2], *head = &m->units[m->nunits - 1].ops[1];
    const size_t np = hp_net_nparams(net);
    int32_t *tok = malloc((size_t)n * sizeof(int32_t)), *lab = malloc((size_t)n * sizeof(int32_t));
    if (!tok || !lab || att->type != HP_OP_ATTENTION)
        return 1;
    for (int i = 0; i < n; i++) {
        tok[i] = (int32_t)(hp_rng_u64(21, (uint64_t)i) % (uint64_t)V);
        lab[i] = (int32_t)(hp_rng_u64(22, (uint64_t)i) % (uint64_t)V);
        hp_net_input(net, 0)[i] = (float)tok[i];
    }
    if (write_file(dir, "params.bin", hp_net_params(net), np * sizeof(float)) ||
        hp_net_forward(net, 0, 1, 0) ||
        write_file(dir, "logits.bin", hp_net_output(net, 0), (size_t)n * V * sizeof(float)) ||
        hp_net_loss_tokens(net, 0, lab, BATCH, 1, &loss, &correct) || hp_net_backward(net, 0) ||
        write_file(dir, "grads.bin", hp_net_grads(net), np * sizeof(float)) ||
        write_file(dir, "tokens.bin", tok, (size_t)n * sizeof(int32_t)) ||
        write_file(dir, "labels.bin", lab, (size_t)n * sizeof(int32_t)))
        return 1;
    snprintf(text, sizeof(text), "%d %d %d %d %d %d %d\n", BATCH, T, V, m->units[0].out.w,
             m->nunits - 2, att->heads, head->tie);
    if (write_file(dir, "meta.txt", text, strlen(text)))
        return 1;
    snprintf(text, sizeof(text), "%.9g\n", loss / n);
    if (write_file(dir, "loss.txt", text, strlen(text)))
        return 1;
    printf("gpt_ref: %s, %zu parameters, loss %.6f, written to %s\n", m->name, np, loss / n, dir);
    free(tok);
    free(lab);
    hp_net_destroy(net);
    hp_backend_destroy(be);
    hp_model_destroy(m);
    return 0;
}
