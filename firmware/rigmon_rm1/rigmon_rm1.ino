// rigmon RM1 reference firmware: an INA226 on the GPU-side 12 V terminals, reported as
// min/mean/max windows over USB serial. Record formatting lives in rm1.c (plain C, tested on
// the host by rigmon's test suite). Build notes: ../README.md.
#include <Arduino.h>
#include <Wire.h>

extern "C" {
#include "rm1.h"
}

// ---- configuration --------------------------------------------------------------------
#define FIRMWARE "rmfw-0.3"
#define DEVICE_ID "UNSET0001"          // set a unique id per board (RP2040: the flash UID)
#define INA_LOAD 0x40                  // INA226 on the load (GPU) side: bus voltage + shunt
#define INA_PSU 0x41                   // second INA226 on the PSU side (bus voltage only); 0 = none
#define SHUNT_MICROOHM 375             // external 75 mV / 200 A shunt
#define UNDER_VOLTAGE_MV 11450         // hardware sag trap (BUL + latch), reported as flag 4
#define DEFAULT_WINDOW_MS 1000

// INA226 registers and bits (TI SBOS547).
#define REG_CONFIG 0x00
#define REG_SHUNT 0x01
#define REG_BUS 0x02
#define REG_MASK 0x06
#define REG_LIMIT 0x07
// AVG=1, VBUSCT=VSHCT=332 us, continuous shunt+bus: a fresh pair every ~0.7 ms.
#define CONFIG_FAST 0x4097
#define MASK_BUL 0x1000
#define MASK_LEN 0x0001
#define MASK_AFF 0x0010
#define MASK_CVRF 0x0008
#define BUS_LSB_UV 1250
#define SHUNT_LSB_NV 2500

static const char *const KEYS[] = {"v", "i", "vpsu"};
static rm1_window window;
static uint32_t window_ms = DEFAULT_WINDOW_MS;
static uint32_t seq = 0;
static uint32_t carry_flags = 0;
static char line[RM1_MAX_LINE + 1];
static char command[16];
static uint8_t command_len = 0;

static bool write_reg(uint8_t addr, uint8_t reg, uint16_t value) {
  Wire.beginTransmission(addr);
  Wire.write(reg);
  Wire.write((uint8_t)(value >> 8));
  Wire.write((uint8_t)value);
  return Wire.endTransmission() == 0;
}

static bool read_reg(uint8_t addr, uint8_t reg, uint16_t *value) {
  Wire.beginTransmission(addr);
  Wire.write(reg);
  if (Wire.endTransmission(false) != 0 || Wire.requestFrom((int)addr, 2) != 2) return false;
  *value = ((uint16_t)Wire.read() << 8) | Wire.read();
  return true;
}

static size_t channel_count() { return INA_PSU ? 3 : 2; }

// The line being sent: it goes out as the serial buffer takes it, a piece per loop() if need be.
// An AVR's transmit buffer (64 bytes) never holds a whole line, so waiting for room for all of
// it would drop every record.
static char pending[RM1_MAX_LINE + 1];
static size_t pending_len = 0;
static size_t pending_at = 0;

static void flush_pending() {
  while (pending_at < pending_len) {
    int room = Serial.availableForWrite();
    if (room <= 0) return;
    size_t chunk = pending_len - pending_at;
    if ((size_t)room < chunk) chunk = (size_t)room;
    Serial.write((const uint8_t *)pending + pending_at, chunk);
    pending_at += chunk;
  }
  pending_len = pending_at = 0;
}

static bool send(size_t len) {
  // Never block on the host: while the previous line is still going out, drop this record and
  // flag the overrun in the next one. Returns whether the record was kept.
  flush_pending();
  if (len == 0 || pending_len) {
    carry_flags |= RM1_FLAG_OVERRUN;
    return false;
  }
  memcpy(pending, line, len);
  pending_len = len;
  pending_at = 0;
  flush_pending();
  return true;
}

static void send_identity() {
  send(rm1_format_identity(line, sizeof line, FIRMWARE, DEVICE_ID, "ina226", window_ms, KEYS, channel_count()));
}

static void handle_host() {
  while (Serial.available() > 0) {
    char ch = (char)Serial.read();
    if (ch == '\n' || ch == '\r') {
      command[command_len] = '\0';
      if (command_len == 1 && command[0] == '?') {
        send_identity();
      } else if (command_len > 2 && command[0] == 'W' && command[1] == '=') {
        long ms = atol(command + 2);
        window_ms = ms < 50 ? 50 : ms > 60000 ? 60000 : (uint32_t)ms;
        send_identity();
      }
      command_len = 0;
    } else if (command_len < sizeof command - 1) {
      command[command_len++] = ch;
    }
  }
}

void setup() {
  Serial.begin(115200);  // USB CDC ignores the rate; never wait for the host (no while(!Serial))
  Wire.begin();
  Wire.setClock(400000);
  write_reg(INA_LOAD, REG_CONFIG, CONFIG_FAST);
  write_reg(INA_LOAD, REG_LIMIT, (uint16_t)((uint32_t)UNDER_VOLTAGE_MV * 1000 / BUS_LSB_UV));
  write_reg(INA_LOAD, REG_MASK, MASK_BUL | MASK_LEN);
  if (INA_PSU) write_reg(INA_PSU, REG_CONFIG, CONFIG_FAST);
  rm1_window_init(&window, KEYS, channel_count(), millis());
  send_identity();
}

void loop() {
  uint16_t mask, bus, shunt, bus_psu = 0;
  flush_pending();
  handle_host();
  // Reading Mask/Enable reports conversion-ready and clears the latched alert, so every
  // alert is seen exactly once, even one on a conversion we did not read.
  if (read_reg(INA_LOAD, REG_MASK, &mask)) {
    if (mask & MASK_AFF) window.flags |= RM1_FLAG_UNDER_VOLTAGE;
    if (mask & MASK_CVRF) {
      bool ok = read_reg(INA_LOAD, REG_BUS, &bus) && read_reg(INA_LOAD, REG_SHUNT, &shunt);
      if (ok && INA_PSU) ok = read_reg(INA_PSU, REG_BUS, &bus_psu);
      if (ok) {
        int32_t values[3];
        values[0] = (int32_t)((uint32_t)bus * BUS_LSB_UV / 1000);
        values[1] = (int32_t)((int32_t)(int16_t)shunt * SHUNT_LSB_NV / SHUNT_MICROOHM);
        values[2] = (int32_t)((uint32_t)bus_psu * BUS_LSB_UV / 1000);
        rm1_window_add(&window, values);
      } else {
        window.flags |= RM1_FLAG_READ_FAILED;
      }
    }
  } else {
    window.flags |= RM1_FLAG_READ_FAILED;
  }
  uint32_t now = millis();
  if (now - window.start_ms >= window_ms) {
    window.flags |= carry_flags;
    carry_flags = 0;
    if (!send(rm1_format_window(line, sizeof line, &window, seq++, now))) {
      // The record is lost, not the under-voltage alert it latched: the next record carries it
      // beside the overrun flag, so a sag the host did not read in time still raises its alarm.
      carry_flags |= window.flags & RM1_FLAG_UNDER_VOLTAGE;
    }
    rm1_window_reset(&window, now, 0);
  }
}
