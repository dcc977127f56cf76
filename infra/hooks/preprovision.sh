#!/bin/sh
# azd preprovision hook: the Entra app registration operators sign in to.
#
# Plain Bicep cannot create an Entra app registration (that needs the Microsoft Graph extension),
# so this hook does it with the Azure CLI before `azd provision`: it finds or creates the
# registration "<env>-order-processing-operators" with the Operator app role
# (operator-app-roles.json, the role shared/http/operatorAuth.ts checks), makes sure it has a
# service principal (role assignments need one), assigns the role to the deploying user, and
# stores the client id in the azd environment as OPERATOR_AUTH_CLIENT_ID, which
# main.parameters.json hands to Bicep for App Service Authentication (authsettingsV2).
# postprovision.sh then adds the sign-in redirect URI, which needs the app's host name.
#
# Idempotent: a second run finds the registration by the saved client id (or its name) and only
# refreshes the role definition. Needs: az (signed in to the tenant), azd, permission to create
# app registrations. Set OPERATOR_AUTH_SKIP=true to deploy without operator sign-in (every
# operator route then answers 401).
set -eu

if [ "${OPERATOR_AUTH_SKIP:-}" = "true" ]; then
  echo "preprovision: OPERATOR_AUTH_SKIP=true, no operator sign-in"
  azd env set OPERATOR_AUTH_CLIENT_ID ""
  exit 0
fi

here=$(cd "$(dirname "$0")" && pwd)
roles="$here/operator-app-roles.json"
name="${AZURE_ENV_NAME:?AZURE_ENV_NAME is not set: run through azd}-order-processing-operators"

app_id=$(azd env get-value OPERATOR_AUTH_CLIENT_ID 2>/dev/null || true)
if [ -n "$app_id" ] && ! az ad app show --id "$app_id" --query appId -o tsv >/dev/null 2>&1; then
  echo "preprovision: saved OPERATOR_AUTH_CLIENT_ID $app_id no longer exists; looking up by name"
  app_id=""
fi
if [ -z "$app_id" ]; then
  app_id=$(az ad app list --display-name "$name" --query "[0].appId" -o tsv)
fi
if [ -z "$app_id" ]; then
  echo "preprovision: creating the app registration $name"
  app_id=$(az ad app create --display-name "$name" --sign-in-audience AzureADMyOrg \
    --enable-id-token-issuance true --app-roles "@$roles" --query appId -o tsv)
else
  echo "preprovision: using the app registration $name ($app_id)"
  az ad app update --id "$app_id" --app-roles "@$roles"
fi
# Tokens for API calls (az account get-access-token --resource api://<id>) need this audience.
az ad app update --id "$app_id" --identifier-uris "api://$app_id"

sp_id=$(az ad sp list --filter "appId eq '$app_id'" --query "[0].id" -o tsv)
if [ -z "$sp_id" ]; then
  sp_id=$(az ad sp create --id "$app_id" --query id -o tsv)
fi

# The deploying user becomes an operator (azd sets AZURE_PRINCIPAL_ID); others are assigned in
# Entra ID > Enterprise applications > <name> > Users and groups.
user_id=${AZURE_PRINCIPAL_ID:-}
role_id=$(sed -n 's/.*"id": *"\([0-9a-f-]*\)".*/\1/p' "$roles" | head -n 1)
if [ -n "$user_id" ]; then
  assigned=$(az rest --method GET \
    --url "https://graph.microsoft.com/v1.0/servicePrincipals/$sp_id/appRoleAssignedTo" \
    --query "value[?principalId=='$user_id' && appRoleId=='$role_id'] | length(@)" -o tsv)
  if [ "$assigned" = "0" ]; then
    echo "preprovision: assigning the Operator role to $user_id"
    az rest --method POST \
      --url "https://graph.microsoft.com/v1.0/servicePrincipals/$sp_id/appRoleAssignedTo" \
      --headers "Content-Type=application/json" \
      --body "{\"principalId\":\"$user_id\",\"resourceId\":\"$sp_id\",\"appRoleId\":\"$role_id\"}" >/dev/null
  fi
fi

azd env set OPERATOR_AUTH_CLIENT_ID "$app_id"
echo "preprovision: OPERATOR_AUTH_CLIENT_ID=$app_id"
