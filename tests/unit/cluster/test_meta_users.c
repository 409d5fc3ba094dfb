/* test_meta_users.c - users of the client port in the metadata state
 * machine: UpsertUser creates or replaces a SCRAM credential, DeleteUser
 * removes it, refusals change nothing, snapshots carry users exactly (and a
 * state without users encodes as before), and no password or key reaches
 * the command's log description. */
#include "cluster/meta_state.h"
#include "common/err.h"
#include "meta.pb-c.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const uint8_t salt[16] = "saltsaltsaltsalt";

static void bootstrap(struct meta_state *st)
{
  meta_state_init(st);
  uint64_t voters[] = {1};
  uint8_t *cmd;
  size_t len;
  assert_int_equal(meta_cmd_bootstrap("c-1", voters, 1, &cmd, &len), 0);
  struct meta_result res;
  assert_int_equal(meta_apply(st, cmd, len, 0, &res), 0);
  free(cmd);
}

/* u with both mechanisms' keys of password (as libcairn derives them). */
static int user_of(struct meta_user *u, const char *name, const char *password)
{
  struct scram_cred c256, c512;
  assert_int_equal(scram_cred_make(password, salt, sizeof salt, 4096, &c256), 0);
  assert_int_equal(scram_cred_make_mech(SCRAM_SHA_512, password, salt, sizeof salt, 4096, &c512),
                   0);
  struct meta_user_fields f = {name,
                               salt,
                               sizeof salt,
                               4096,
                               c256.stored_key,
                               c256.server_key,
                               SCRAM_KEY_LEN,
                               SCRAM_KEY_LEN,
                               c512.stored_key,
                               c512.server_key,
                               64,
                               64};
  return meta_user_set(u, &f);
}

static int upsert(struct meta_state *st, const char *name, const char *password)
{
  struct meta_user u;
  int rv = user_of(&u, name, password);
  if (rv != 0) {
    return rv;
  }
  uint8_t *cmd;
  size_t len;
  rv = meta_cmd_upsert_user(&u, &cmd, &len);
  if (rv != 0) {
    return rv;
  }
  struct meta_result res;
  rv = meta_apply(st, cmd, len, 0, &res);
  free(cmd);
  return rv;
}

static int delete_user(struct meta_state *st, const char *name)
{
  uint8_t *cmd;
  size_t len;
  int rv = meta_cmd_delete_user(name, &cmd, &len);
  if (rv != 0) {
    return rv;
  }
  struct meta_result res;
  rv = meta_apply(st, cmd, len, 0, &res);
  free(cmd);
  return rv;
}

static void test_meta_users_create_replace_delete(void **state)
{
  struct meta_state st;
  bootstrap(&st);
  assert_int_equal(upsert(&st, "carol", "pw-c"), 0);
  assert_int_equal(upsert(&st, "alice", "pw-a"), 0);
  assert_int_equal(upsert(&st, "bob", "pw-b"), 0);
  assert_int_equal(st.nusers, 3);
  assert_string_equal(st.users[0].name, "alice"); /* ascending */
  assert_string_equal(st.users[2].name, "carol");
  const struct meta_user *u = meta_user_find(&st, "bob");
  assert_non_null(u);
  struct scram_cred want, want512;
  assert_int_equal(scram_cred_make("pw-b", salt, sizeof salt, 4096, &want), 0);
  assert_memory_equal(u->cred.stored_key, want.stored_key, SCRAM_KEY_LEN);
  assert_int_equal(scram_cred_make_mech(SCRAM_SHA_512, "pw-b", salt, sizeof salt, 4096, &want512),
                   0);
  assert_int_equal(u->cred512.mech, SCRAM_SHA_512);
  assert_memory_equal(u->cred512.stored_key, want512.stored_key, 64);
  assert_memory_equal(u->cred512.server_key, want512.server_key, 64);
  assert_true(scram_password_matches(&u->cred512, "pw-b"));
  /* Replacing changes the credential, not the count. */
  assert_int_equal(upsert(&st, "bob", "new"), 0);
  assert_int_equal(st.nusers, 3);
  assert_memory_not_equal(meta_user_find(&st, "bob")->cred.stored_key, want.stored_key,
                          SCRAM_KEY_LEN);
  assert_int_equal(delete_user(&st, "alice"), 0);
  assert_null(meta_user_find(&st, "alice"));
  assert_int_equal(st.nusers, 2);
  assert_int_equal(delete_user(&st, "alice"), CAIRN_EUNKNOWN_USER);
  assert_int_equal(st.nusers, 2);
  meta_state_close(&st);
}

static void test_meta_users_bad_commands_are_refused_and_change_nothing(void **state)
{
  struct meta_state st;
  bootstrap(&st);
  assert_int_equal(upsert(&st, "bad name", "pw"), CAIRN_EINVAL); /* refused at encoding */
  /* A hand-made command with a short key, as another node might send. */
  Cairn__Meta__UpsertUser u = CAIRN__META__UPSERT_USER__INIT;
  u.name = "eve";
  u.salt.data = (uint8_t *)salt;
  u.salt.len = sizeof salt;
  u.iterations = 4096;
  uint8_t key[SCRAM_KEY_LEN] = {0};
  u.stored_key.data = key;
  u.stored_key.len = 16;
  u.server_key.data = key;
  u.server_key.len = SCRAM_KEY_LEN;
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  m.cmd_case = CAIRN__META__META_COMMAND__CMD_UPSERT_USER;
  m.upsert_user = &u;
  uint8_t buf[512];
  size_t len = cairn__meta__meta_command__pack(&m, buf);
  struct meta_result res;
  assert_int_equal(meta_apply(&st, buf, len, 0, &res), CAIRN_EINVAL);
  u.stored_key.len = SCRAM_KEY_LEN;
  u.iterations = 10; /* too few */
  len = cairn__meta__meta_command__pack(&m, buf);
  assert_int_equal(meta_apply(&st, buf, len, 0, &res), CAIRN_EINVAL);
  u.iterations = 4096;
  u.name = "";
  len = cairn__meta__meta_command__pack(&m, buf);
  assert_int_equal(meta_apply(&st, buf, len, 0, &res), CAIRN_EINVAL);
  /* A SCRAM-SHA-512 key of SHA-256's length, or one key of the pair. */
  u.name = "eve";
  uint8_t key512[64] = {0};
  u.stored_key_512 = (ProtobufCBinaryData){SCRAM_KEY_LEN, key512};
  u.server_key_512 = (ProtobufCBinaryData){SCRAM_KEY_LEN, key512};
  len = cairn__meta__meta_command__pack(&m, buf);
  assert_int_equal(meta_apply(&st, buf, len, 0, &res), CAIRN_EINVAL);
  u.stored_key_512.len = 64;
  u.server_key_512.len = 0;
  len = cairn__meta__meta_command__pack(&m, buf);
  assert_int_equal(meta_apply(&st, buf, len, 0, &res), CAIRN_EINVAL);
  assert_int_equal(st.nusers, 0);
  /* Without the pair (a client from before SCRAM-SHA-512): a user with
   * no SCRAM-SHA-512 credential. */
  u.stored_key_512.len = 0;
  len = cairn__meta__meta_command__pack(&m, buf);
  assert_int_equal(meta_apply(&st, buf, len, 0, &res), 0);
  assert_int_equal(st.nusers, 1);
  assert_int_equal(meta_user_find(&st, "eve")->cred512.salt_len, 0);
  assert_int_equal(delete_user(&st, "eve"), 0);
  /* Before Bootstrap nothing applies. */
  struct meta_state fresh;
  meta_state_init(&fresh);
  assert_int_equal(upsert(&fresh, "alice", "pw"), CAIRN_EINVAL);
  assert_int_equal(fresh.nusers, 0);
  meta_state_close(&fresh);
  meta_state_close(&st);
}

static void test_meta_users_snapshot_round_trip(void **state)
{
  struct meta_state st, back;
  bootstrap(&st);
  uint8_t *plain = NULL;
  size_t plain_len = 0;
  assert_int_equal(meta_snapshot_encode(&st, &plain, &plain_len), 0);
  assert_int_equal(upsert(&st, "alice", "pw-a"), 0);
  assert_int_equal(upsert(&st, "bob@example", "pw-b"), 0);
  uint8_t *buf = NULL;
  size_t len = 0;
  assert_int_equal(meta_snapshot_encode(&st, &buf, &len), 0);
  assert_true(len > plain_len);
  /* No password in the snapshot. */
  assert_null(memmem(buf, len, "pw-a", 4));
  meta_state_init(&back);
  assert_int_equal(meta_snapshot_decode(&back, buf, len), 0);
  assert_int_equal(back.nusers, 2);
  for (size_t i = 0; i < 2; i++) {
    assert_string_equal(back.users[i].name, st.users[i].name);
    assert_memory_equal(&back.users[i].cred, &st.users[i].cred, sizeof st.users[i].cred);
    assert_memory_equal(&back.users[i].cred512, &st.users[i].cred512, sizeof st.users[i].cred512);
    assert_int_equal(back.users[i].cred512.salt_len, sizeof salt);
  }
  /* Deleting every user gives back the bytes of a state without users. */
  assert_int_equal(delete_user(&back, "alice"), 0);
  assert_int_equal(delete_user(&back, "bob@example"), 0);
  uint8_t *again = NULL;
  size_t again_len = 0;
  assert_int_equal(meta_snapshot_encode(&back, &again, &again_len), 0);
  assert_int_equal(again_len, plain_len);
  /* (the last index differs not: no raft indexes were given) */
  assert_memory_equal(again, plain, plain_len);
  free(plain);
  free(again);
  free(buf);
  meta_state_close(&back);
  meta_state_close(&st);
}

static void test_meta_users_describe_shows_no_credential(void **state)
{
  struct meta_user u;
  assert_int_equal(user_of(&u, "alice", "secret-pw"), 0);
  uint8_t *cmd;
  size_t len;
  assert_int_equal(meta_cmd_upsert_user(&u, &cmd, &len), 0);
  char line[256];
  meta_cmd_describe(cmd, len, line, sizeof line);
  assert_string_equal(line, "UpsertUser alice");
  free(cmd);
  assert_int_equal(meta_cmd_delete_user("alice", &cmd, &len), 0);
  meta_cmd_describe(cmd, len, line, sizeof line);
  assert_string_equal(line, "DeleteUser alice");
  free(cmd);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_meta_users_create_replace_delete),
      cmocka_unit_test(test_meta_users_bad_commands_are_refused_and_change_nothing),
      cmocka_unit_test(test_meta_users_snapshot_round_trip),
      cmocka_unit_test(test_meta_users_describe_shows_no_credential),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
