/* gpt_ref.c - one side of the GPT cross-check with PyTorch (tests/cli/gpt_equiv.py is the
 * other): one training forward and backward of a text model (default gpt-tiny, no dropout)
 * on the CPU backend, minibatch 4, deterministic token ids and labels, then STEPS (default
 * 10) AdamW steps as hetpipe train takes them (runtime/train.c: the tied embeddings'
 * gradients summed by hp_net_tie_sum, clipped to the global norm CLIP, hp_net_adamw with
 * weight decay 0.1 at the learning rate of runtime/lrsched.h: peak 3e-3, warm-up 3 steps,
 * cosine to 0 at STEPS), a new minibatch each step (the first is the one above), writing
 * into DIR:
 *   meta.txt      B T V d blocks heads tie, one line
 *   params.bin    the initial parameters, float32 in hetpipe's layout (layers.h, net.h)
 *   tokens.bin    the input token ids, int32 [B, T]
 *   labels.bin    the labels, int32 [B, T]
 *   logits.bin    the output, float32 [B, T, V]
 *   loss.txt      the mean loss over the B x T positions
 *   grads.bin     every parameter's gradient, float32, parallel to params.bin (each tied
 *                 copy its own, before the sum)
 *   adamw.txt     STEPS CLIP LR WARMUP WD BETA1 BETA2 EPS, one line
 *   steps_tokens.bin, steps_labels.bin  every step's minibatch, int32 [STEPS, B, T]
 *   steps.txt     per step: the learning rate, the mean loss, the global gradient norm
 *                 before clipping (hp_net_grad_sumsq: the tied matrix once)
 *   params_after.bin  the parameters after the STEPS steps, parallel to params.bin
 * Usage: gpt_ref DIR [MODEL] [STEPS] [CLIP] (CLIP default 0.75: 7 of the 10 steps clip)
 */
#include "backend.h"
#include "lrsched.h"
#include "model.h"
#include "net.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 4
#define LR 3e-3
#define WARMUP 3
#define WD 0.1f
#define BETA1 0.9f
#define BETA2 0.95f
#define EPS 1e-8f

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

/* Step s's minibatch (n = B x T ids and labels) into tok, lab and the net's input. */
static void minibatch(struct hp_net *net, int s, int n, int V, int32_t *tok, int32_t *lab)
{
    for (int i = 0; i < n; i++) {
        const uint64_t k = (uint64_t)s * (uint64_t)n + (uint64_t)i;
        tok[i] = (int32_t)(hp_rng_u64(21, k) % (uint64_t)V);
        lab[i] = (int32_t)(hp_rng_u64(22, k) % (uint64_t)V);
        hp_net_input(net, 0)[i] = (float)tok[i];
    }
}

/* The first step's forward and backward, its outputs written (the parameters untouched). */
static int first_step(const char *dir, const struct hp_model *m, struct hp_net *net, int32_t *tok,
                      int32_t *lab, double *loss0)
{
    const int T = m->positions, V = m->classes, n = BATCH * T;
    const struct hp_op *att = &m->units[1].ops[2], *head = &m->units[m->nunits - 1].ops[1];
    const size_t np = hp_net_nparams(net);
    char text[256];
    double loss;
    int correct;

    if (att->type != HP_OP_ATTENTION)
        return -1;
    minibatch(net, 0, n, V, tok, lab);
    if (write_file(dir, "params.bin", hp_net_params(net), np * sizeof(float)) ||
        hp_net_forward(net, 0, 1, 0) ||
        write_file(dir, "logits.bin", hp_net_output(net, 0), (size_t)n * V * sizeof(float)) ||
        hp_net_loss_tokens(net, 0, lab, BATCH, 1, &loss, &correct) || hp_net_backward(net, 0) ||
        write_file(dir, "grads.bin", hp_net_grads(net), np * sizeof(float)) ||
        write_file(dir, "tokens.bin", tok, (size_t)n * sizeof(int32_t)) ||
        write_file(dir, "labels.bin", lab, (size_t)n * sizeof(int32_t)))
        return -1;
    snprintf(text, sizeof(text), "%d %d %d %d %d %d %d\n", BATCH, T, V, m->units[0].out.w,
             m->nunits - 2, att->heads, head->tie);
    if (write_file(dir, "meta.txt", text, strlen(text)))
        return -1;
    *loss0 = loss;
    snprintf(text, sizeof(text), "%.9g\n", loss / n);
    printf("gpt_ref: %s, %zu parameters, loss %.6f, written to %s\n", m->name, np, loss / n, dir);
    return write_file(dir, "loss.txt", text, strlen(text));
}

/* `steps` AdamW steps as runtime/train.c's update takes them, from the first step's
 * gradients (already there) on; every step's minibatch, rate, loss and norm written. */
static int adamw_steps(const char *dir, const struct hp_model *m, struct hp_net *net, int steps,
                       double clip, double loss0, int32_t *tok, int32_t *lab)
{
    const int T = m->positions, V = m->classes, n = BATCH * T;
    const struct hp_lrsched sched = {.lr = LR, .warmup = WARMUP, .total = steps, .cosine = 1};
    int32_t *all = malloc((size_t)steps * 2 * n * sizeof(int32_t));
    char path[4096], text[256];
    int rc = all ? 0 : -1, clipped = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/steps.txt", dir);
    if (rc || !(f = fopen(path, "w"))) {
        free(all);
        return -1;
    }
    for (int s = 0; s < steps && !rc; s++) {
        const float lr = (float)hp_lrsched_at(&sched, s);
        const struct hp_adamw_desc d = {
            .lr = lr, .wd = WD, .beta1 = BETA1, .beta2 = BETA2, .eps = EPS, .step = s + 1};
        double loss = loss0, sumsq = 0.0;
        int correct;
        if (s > 0) {
            minibatch(net, s, n, V, tok, lab);
            rc = hp_net_forward(net, 0, 1, (uint64_t)s) ||
                 hp_net_loss_tokens(net, 0, lab, BATCH, 1, &loss, &correct) ||
                 hp_net_backward(net, 0);
        }
        memcpy(all + (size_t)s * n, tok, (size_t)n * sizeof(int32_t));
        memcpy(all + ((size_t)steps + s) * n, lab, (size_t)n * sizeof(int32_t));
        rc = rc || hp_net_tie_sum(net, NULL) || hp_net_grad_sumsq(net, &sumsq) ||
             hp_net_clip_grads(net, sqrt(sumsq), clip) || hp_net_adamw(net, &d);
        clipped += sqrt(sumsq) > clip;
        fprintf(f, "%.9g %.9g %.9g\n", (double)lr, loss / n, sqrt(sumsq));
    }
    if (fclose(f) || rc)
        rc = -1;
    snprintf(text, sizeof(text), "%d %.9g %.9g %d %.9g %.9g %.9g %.9g\n", steps, clip, LR, WARMUP,
             (double)WD, (double)BETA1, (double)BETA2, (double)EPS);
    if (!rc && (write_file(dir, "steps_tokens.bin", all, (size_t)steps * n * sizeof(int32_t)) ||
                write_file(dir, "steps_labels.bin", all + (size_t)steps * n,
                           (size_t)steps * n * sizeof(int32_t)) ||
                write_file(dir, "adamw.txt", text, strlen(text)) ||
                write_file(dir, "params_after.bin", hp_net_params(net),
                           hp_net_nparams(net) * sizeof(float))))
        rc = -1;
    if (!rc)
        printf("gpt_ref: %d AdamW steps (clip %g: %d of them clipped)\n", steps, clip, clipped);
    free(all);
    return rc;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".", *name = argc > 2 ? argv[2] : "gpt-tiny";
    const int steps = argc > 3 ? atoi(argv[3]) : 10;
    const double clip = argc > 4 ? atof(argv[4]) : 0.75;
    struct hp_model *m = NULL;
    struct hp_backend *be = NULL;
    struct hp_net *net = NULL;
    const struct hp_net_config cfg = {.batch = BATCH, .nslots = 1, .optimizer = HP_OPTIMIZER_ADAMW};

    hp_backend_cpu_set_threads(1);
    if (steps < 1 || hp_model_load(name, &m) || !m->positions || hp_backend_cpu_create(&be) ||
        hp_net_create(be, m, 0, m->nunits, &cfg, &net) || hp_net_init_params(net, 1))
        return 1;
    const size_t n = (size_t)BATCH * m->positions;
    int32_t *tok = malloc(n * sizeof(int32_t)), *lab = malloc(n * sizeof(int32_t));
    double loss0;
    if (!tok || !lab || first_step(dir, m, net, tok, lab, &loss0) ||
        adamw_steps(dir, m, net, steps, clip, loss0, tok, lab))
        return 1;
    free(tok);
    free(lab);
    hp_net_destroy(net);
    hp_backend_destroy(be);
    hp_model_destroy(m);
    return 0;
}
