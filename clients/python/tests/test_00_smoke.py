def test_the_server_answers(steward, live, expiring):
    org = steward.organization.get()
    assert org["organization_id"] == live.org_id
    assert org["name"] == "Python client"
    assert expiring["thread"].is_alive()
