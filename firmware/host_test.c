/* Host driver for rigmon's test: feeds rm1.c samples read from stdin and prints RM1 lines.
 *
 * Input lines: "id FW ID SENSOR WIN" prints the identity; "s V I VPSU" adds a sample (mV, mA);
 * "f FLAGS" ors flags into the window; "w SEQ NOW_MS" prints the window and starts the next.
 */
#include <stdio.h>
#include <string.h>

#include "rigmon_rm1/rm1.h"

int main(void) {
    static const char *const keys[] = {"v", "i", "vpsu"};
    rm1_window w;
    char line[256], out[RM1_MAX_LINE + 1];
    rm1_window_init(&w, keys, 3, 0);
    while (fgets(line, sizeof line, stdin)) {
        char fw[100], id[100], sensor[100];
        long a, b, c;
        unsigned long seq, now, win, flags;
        size_t len = 0;
        if (sscanf(line, "id %99s %99s %99s %lu", fw, id, sensor, &win) == 4) {
            len = rm1_format_identity(out, sizeof out, fw, id, sensor, (uint32_t)win, keys, 3);
        } else if (sscanf(line, "s %ld %ld %ld", &a, &b, &c) == 3) {
            int32_t values[3] = {(int32_t)a, (int32_t)b, (int32_t)c};
            rm1_window_add(&w, values);
            continue;
        } else if (sscanf(line, "f %lu", &flags) == 1) {
            w.flags |= (uint32_t)flags;
            continue;
        } else if (sscanf(line, "w %lu %lu", &seq, &now) == 2) {
            len = rm1_format_window(out, sizeof out, &w, (uint32_t)seq, (uint32_t)now);
            rm1_window_reset(&w, (uint32_t)now, 0);
        } else {
            continue;
        }
        if (len == 0) {
            fputs("OVERFLOW\n", stdout);
        } else {
            fwrite(out, 1, len, stdout);
        }
    }
    return 0;
}
